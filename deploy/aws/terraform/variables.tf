variable "cluster_name" {
  description = "The EKS cluster's name (also Lifeboat's CLUSTER_NAME)."
  type        = string
}

variable "namespace" {
  description = "The namespace Lifeboat is installed in."
  type        = string
  default     = "kube-system"
}

variable "service_account_name" {
  description = "The controller's ServiceAccount; with NTH's values, the name NTH's chart gave the release (docs/operations/migrating-from-nth.md)."
  type        = string
  default     = "lifeboat-controller"
}

variable "credential_mode" {
  description = "How the controller gets the role: pod-identity (an EKS Pod Identity association) or irsa (a trust policy on the cluster's OIDC provider)."
  type        = string
  default     = "pod-identity"
  validation {
    condition     = contains(["pod-identity", "irsa"], var.credential_mode)
    error_message = "credential_mode must be pod-identity or irsa."
  }
}

variable "oidc_provider" {
  description = "For irsa: the cluster's OIDC issuer without https:// (oidc.eks.<region>.amazonaws.com/id/<id>)."
  type        = string
  default     = ""
}

variable "message_retention_seconds" {
  description = "How long a message waits while the controller is down; the controller deletes each once its notices are recorded."
  type        = number
  default     = 86400
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
