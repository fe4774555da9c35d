variable "cluster_name" {
  description = "The EKS cluster's name (also Lifeboat's CLUSTER_NAME); the role acts only on groups and instances tagged kubernetes.io/cluster/<name>."
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
  validation {
    condition     = can(regex("^$|^[A-Za-z0-9][A-Za-z0-9.-]*(/[A-Za-z0-9._~-]+)*$", var.oidc_provider))
    error_message = "oidc_provider must be the cluster's OIDC issuer without https:// (oidc.eks.<region>.amazonaws.com/id/<id>)."
  }
}

variable "existing_queue_arn" {
  description = "An existing queue (NTH's, for instance) to use instead of making one: its ARN. The rules send to it and the role reads it; its policy and dead-letter queue stay as they are (docs/deploy.md)."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}$", var.existing_queue_arn))
    error_message = "existing_queue_arn must be the ARN of a standard queue (arn:aws:sqs:<region>:<account>:<name>)."
  }
}

variable "message_retention_seconds" {
  description = "How long a message waits while the controller is down; the controller deletes each once its notices are recorded."
  type        = number
  default     = 86400
  validation {
    condition     = var.message_retention_seconds >= 60 && var.message_retention_seconds <= 1209600
    error_message = "message_retention_seconds must be 60 to 1209600."
  }
}

variable "max_receive_count" {
  description = "Deliveries of a message before it moves to the dead-letter queue. The controller keeps some messages on purpose (a launch hook's while its node joins, another cluster's): see docs/deploy.md before lowering it."
  type        = number
  default     = 1000
  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "max_receive_count must be 1 to 1000."
  }
}

variable "kms_key_arn" {
  description = "A KMS key for the queues instead of SQS-managed encryption (its key policy must let events.amazonaws.com use it, docs/deploy.md); with existing_queue_arn, the key that queue uses. The role may decrypt with it."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key's ARN (arn:aws:kms:<region>:<account>:key/<id>), not an alias."
  }
}

variable "oldest_message_alarm_seconds" {
  description = "The alarm goes off when the queue's oldest message is older than this: the controller is not reading it. The default stays above the 10 minutes a message about another cluster's instance counts (docs/deploy.md)."
  type        = number
  default     = 900
  validation {
    condition     = var.oldest_message_alarm_seconds >= 60 && var.oldest_message_alarm_seconds <= 1209600
    error_message = "oldest_message_alarm_seconds must be 60 to 1209600."
  }
}

variable "alarm_topic_arn" {
  description = "An SNS topic the alarms notify (and notify again when back to OK); empty, they only change state."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_.-]{1,256}$", var.alarm_topic_arn))
    error_message = "alarm_topic_arn must be an SNS topic's ARN."
  }
}

variable "launch_lifecycle_actions" {
  description = "Send Auto Scaling launch lifecycle actions (Lifeboat completes a launch hook once the node is Ready); false when another tool owns the launch hooks."
  type        = bool
  default     = true
}

variable "rebalance_recommendations" {
  description = "Send EC2 rebalance recommendations."
  type        = bool
  default     = true
}

variable "role_name" {
  description = "The role's name; empty, lifeboat-<cluster_name>-<region> (role names are global to the account)."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^[A-Za-z0-9+=,.@_-]{1,64}$", var.role_name))
    error_message = "role_name must be 1 to 64 of A-Z a-z 0-9 + = , . @ _ -."
  }
}

variable "role_path" {
  description = "The role's path."
  type        = string
  default     = "/"
  validation {
    condition     = can(regex("^/([!-~]{1,510}/)?$", var.role_path))
    error_message = "role_path must start and end with /."
  }
}

variable "permissions_boundary_arn" {
  description = "A managed policy to set as the role's permissions boundary."
  type        = string
  default     = ""
  validation {
    condition     = can(regex("^$|^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/.+$", var.permissions_boundary_arn))
    error_message = "permissions_boundary_arn must be a managed policy's ARN."
  }
}

variable "mark_instances_unhealthy" {
  description = "Grant autoscaling:SetInstanceHealth, for SET_IMPAIRED_INSTANCE_UNHEALTHY or ENABLE_NODE_REPAIR (NODE_REPAIR_ACTION=mark-unhealthy)."
  type        = bool
  default     = false
}

variable "abandon_on_incomplete_drain" {
  description = "Grant autoscaling:DescribeAutoScalingGroups and TerminateInstanceInAutoScalingGroup, for ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN."
  type        = bool
  default     = false
}

variable "terminate_repaired_instances" {
  description = "Grant ec2:TerminateInstances on the cluster's instances, for ENABLE_NODE_REPAIR with NODE_REPAIR_ACTION=terminate."
  type        = bool
  default     = false
}

variable "reboot_repaired_instances" {
  description = "Grant ec2:RebootInstances on the cluster's instances, for ENABLE_NODE_REPAIR with a policy whose action is reboot."
  type        = bool
  default     = false
}

variable "describe_eks_nodegroups" {
  description = "Grant eks:DescribeNodegroup on the cluster's managed node groups, for ENABLE_NODE_REPAIR with NODE_REPAIR_EKS_LOOKUP (which node groups have EKS node auto repair on)."
  type        = bool
  default     = false
}

variable "setup_check" {
  description = "Grant events:ListRuleNamesByTarget and events:DescribeRule, so that the controller checks the rules that feed the queue (they read the account's rules)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
