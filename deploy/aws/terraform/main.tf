# Lifeboat's AWS set-up for one cluster, in controller mode: its own SQS queue, an EventBridge
# rule for every kind of notice Lifeboat acts on, and an IAM role for the controller's
# ServiceAccount (EKS Pod Identity or IRSA) that allows every AWS call Lifeboat makes and
# nothing more. deploy/aws_test.go holds the rules to the notice kinds the binary reads and the
# policy to deploy.AWSPermissions.
#
#   module "lifeboat" {
#     source       = "github.com/lifeboat-dev/lifeboat//deploy/aws/terraform?ref=v0.1.0"
#     cluster_name = "prod"
#   }

terraform {
  required_version = ">= 1.3"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.31"
    }
  }
}

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  # One rule per kind of notice: the EventBridge pattern that selects it.
  rules = {
    spot-interruption = {
      source      = ["aws.ec2"]
      detail-type = ["EC2 Spot Instance Interruption Warning"]
    }
    capacity-reservation-interruption = {
      source      = ["aws.ec2"]
      detail-type = ["EC2 Capacity Reservation Instance Interruption Warning", "EC2 Interruptible Capacity Reservation Instance Interruption Warning"]
    }
    capacity-block-expiration = {
      source      = ["aws.ec2"]
      detail-type = ["Capacity Block Expiration Warning", "Capacity Block Reservation Expiration Warning"]
    }
    rebalance = {
      source      = ["aws.ec2"]
      detail-type = ["EC2 Instance Rebalance Recommendation"]
    }
    state-change = {
      source      = ["aws.ec2"]
      detail-type = ["EC2 Instance State-change Notification"]
      detail      = { state = ["stopping", "stopped", "shutting-down", "terminated"] }
    }
    lifecycle-action = {
      source      = ["aws.autoscaling"]
      detail-type = ["EC2 Instance-terminate Lifecycle Action", "EC2 Instance-launch Lifecycle Action"]
    }
    health = {
      source      = ["aws.health"]
      detail-type = ["AWS Health Event"]
      detail      = { service = ["EC2"], eventTypeCategory = ["scheduledChange"] }
    }
  }

  # The controller's calls, by the resources they may name.
  queue_actions = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"]
  describe_actions = [
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeCapacityReservations",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLifecycleHooks",
    "autoscaling:DescribeAutoScalingGroups",
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetHealth",
  ]
  group_actions = [
    "autoscaling:CompleteLifecycleAction",
    "autoscaling:RecordLifecycleActionHeartbeat",
    "autoscaling:SetInstanceHealth",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
  ]

  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition
}

resource "aws_sqs_queue" "notices" {
  name                      = "lifeboat-${var.cluster_name}"
  message_retention_seconds = var.message_retention_seconds
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_cloudwatch_event_rule" "notices" {
  for_each      = local.rules
  name          = "lifeboat-${var.cluster_name}-${each.key}"
  description   = "Lifeboat: ${each.key} notices to lifeboat-${var.cluster_name}"
  event_pattern = jsonencode(each.value)
  tags          = var.tags
}

resource "aws_cloudwatch_event_target" "notices" {
  for_each  = local.rules
  rule      = aws_cloudwatch_event_rule.notices[each.key].name
  target_id = "lifeboat"
  arn       = aws_sqs_queue.notices.arn
}

# Only this account's rules above may send to the queue.
resource "aws_sqs_queue_policy" "notices" {
  queue_url = aws_sqs_queue.notices.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "EventBridgeRulesOfThisModule"
      Effect    = "Allow"
      Principal = { Service = "events.amazonaws.com" }
      Action    = "sqs:SendMessage"
      Resource  = aws_sqs_queue.notices.arn
      Condition = {
        ArnEquals    = { "aws:SourceArn" = [for r in aws_cloudwatch_event_rule.notices : r.arn] }
        StringEquals = { "aws:SourceAccount" = local.account }
      }
    }]
  })
}

resource "aws_iam_role" "controller" {
  name        = "lifeboat-${var.cluster_name}"
  description = "Lifeboat's controller"
  tags        = var.tags
  assume_role_policy = var.credential_mode == "pod-identity" ? jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "pods.eks.amazonaws.com" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
    }]
    }) : jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Federated = "arn:${local.partition}:iam::${local.account}:oidc-provider/${var.oidc_provider}" }
      Action    = "sts:AssumeRoleWithWebIdentity"
      Condition = {
        StringEquals = {
          "${var.oidc_provider}:sub" = "system:serviceaccount:${var.namespace}:${var.service_account_name}"
          "${var.oidc_provider}:aud" = "sts.amazonaws.com"
        }
      }
    }]
  })
}

resource "aws_iam_role_policy" "controller" {
  name = "lifeboat"
  role = aws_iam_role.controller.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      { Sid = "Queue", Effect = "Allow", Action = local.queue_actions, Resource = aws_sqs_queue.notices.arn },
      { Sid = "Describe", Effect = "Allow", Action = local.describe_actions, Resource = "*" },
      {
        Sid      = "LifecycleActions"
        Effect   = "Allow"
        Action   = local.group_actions
        Resource = "arn:${local.partition}:autoscaling:${data.aws_region.current.name}:${local.account}:autoScalingGroup:*:autoScalingGroupName/*"
      },
    ]
  })
}

resource "aws_eks_pod_identity_association" "controller" {
  count           = var.credential_mode == "pod-identity" ? 1 : 0
  cluster_name    = var.cluster_name
  namespace       = var.namespace
  service_account = var.service_account_name
  role_arn        = aws_iam_role.controller.arn
  tags            = var.tags
}
