# Lifeboat's AWS set-up for one cluster, in controller mode: its own SQS queue (with a
# dead-letter queue, TLS only, optionally a KMS key) or an existing one, an EventBridge rule for
# every kind of notice Lifeboat acts on, alarms on the queue, and an IAM role for the
# controller's ServiceAccount (EKS Pod Identity or IRSA) that allows every AWS call Lifeboat
# makes with the features turned on, and nothing more. deploy/aws_test.go holds the rules to the
# notice kinds the binary reads, the policy to deploy.AWSPermissions, and the module to the
# CloudFormation template beside it (the same inputs, the same set-up).
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
  all_rules = {
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
      detail-type = concat(["EC2 Instance-terminate Lifecycle Action"], var.launch_lifecycle_actions ? ["EC2 Instance-launch Lifecycle Action"] : [])
    }
    health = {
      source      = ["aws.health"]
      detail-type = ["AWS Health Event"]
      detail      = { service = ["EC2"], eventTypeCategory = ["scheduledChange"] }
    }
  }
  rules = { for k, v in local.all_rules : k => v if k != "rebalance" || var.rebalance_recommendations }

  make_queue = var.existing_queue_arn == ""
  # The padding keeps the index in range when no ARN is given.
  existing   = split(":", "${var.existing_queue_arn}:::::")
  queue_arn  = local.make_queue ? aws_sqs_queue.notices[0].arn : var.existing_queue_arn
  queue_url  = local.make_queue ? aws_sqs_queue.notices[0].url : "https://sqs.${local.existing[3]}.${data.aws_partition.current.dns_suffix}/${local.existing[4]}/${local.existing[5]}"
  queue_name = local.make_queue ? aws_sqs_queue.notices[0].name : local.existing[5]

  # The controller's calls, by the resources they may name; group and instance calls only on
  # those tagged for the cluster. Each opt-in feature's calls only with its input.
  queue_actions = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"]
  describe_actions = [
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeCapacityReservations",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLifecycleHooks",
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetHealth",
  ]
  group_actions = ["autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"]
  groups        = "arn:${local.partition}:autoscaling:${local.region}:${local.account}:autoScalingGroup:*:autoScalingGroupName/*"
  instances     = "arn:${local.partition}:ec2:${local.region}:${local.account}:instance/*"
  nodegroups    = "arn:${local.partition}:eks:${local.region}:${local.account}:nodegroup/${var.cluster_name}/*"
  cluster_tag   = { StringEquals = { "aws:ResourceTag/kubernetes.io/cluster/${var.cluster_name}" = ["owned", "shared"] } }
  # Each opt-in statement with the input that turns it on.
  optional_statements = [
    { on = var.kms_key_arn != "", statement = { Sid = "QueueKey", Effect = "Allow", Action = "kms:Decrypt", Resource = var.kms_key_arn } },
    { on = var.mark_instances_unhealthy, statement = { Sid = "MarkInstancesUnhealthy", Effect = "Allow", Action = "autoscaling:SetInstanceHealth", Resource = local.groups, Condition = local.cluster_tag } },
    { on = var.abandon_on_incomplete_drain, statement = { Sid = "RetentionPolicies", Effect = "Allow", Action = "autoscaling:DescribeAutoScalingGroups", Resource = "*" } },
    { on = var.abandon_on_incomplete_drain, statement = { Sid = "TerminateRetainedInstances", Effect = "Allow", Action = "autoscaling:TerminateInstanceInAutoScalingGroup", Resource = local.groups, Condition = local.cluster_tag } },
    { on = var.terminate_repaired_instances, statement = { Sid = "TerminateRepairedInstances", Effect = "Allow", Action = "ec2:TerminateInstances", Resource = local.instances, Condition = local.cluster_tag } },
    { on = var.reboot_repaired_instances, statement = { Sid = "RebootRepairedInstances", Effect = "Allow", Action = "ec2:RebootInstances", Resource = local.instances, Condition = local.cluster_tag } },
    { on = var.describe_eks_nodegroups, statement = { Sid = "DescribeEKSNodegroups", Effect = "Allow", Action = "eks:DescribeNodegroup", Resource = local.nodegroups } },
    { on = var.setup_check, statement = { Sid = "SetupCheck", Effect = "Allow", Action = ["events:ListRuleNamesByTarget", "events:DescribeRule"], Resource = "*" } },
  ]
  statements = concat(
    [
      { Sid = "Queue", Effect = "Allow", Action = local.queue_actions, Resource = local.queue_arn },
      { Sid = "Describe", Effect = "Allow", Action = local.describe_actions, Resource = "*" },
      { Sid = "LifecycleActions", Effect = "Allow", Action = local.group_actions, Resource = local.groups, Condition = local.cluster_tag },
    ],
    [for o in local.optional_statements : o.statement if o.on],
  )

  account       = data.aws_caller_identity.current.account_id
  partition     = data.aws_partition.current.partition
  region        = data.aws_region.current.name
  alarm_actions = var.alarm_topic_arn == "" ? [] : [var.alarm_topic_arn]
}

resource "aws_sqs_queue" "notices" {
  count                     = local.make_queue ? 1 : 0
  name                      = "lifeboat-${var.cluster_name}"
  message_retention_seconds = var.message_retention_seconds
  sqs_managed_sse_enabled   = var.kms_key_arn == "" ? true : null
  kms_master_key_id         = var.kms_key_arn == "" ? null : var.kms_key_arn
  redrive_policy            = jsonencode({ deadLetterTargetArn = aws_sqs_queue.dead_letters[0].arn, maxReceiveCount = var.max_receive_count })
  tags                      = var.tags
}

# What the controller could not consume; a moved message keeps its age, so the longest retention.
resource "aws_sqs_queue" "dead_letters" {
  count                     = local.make_queue ? 1 : 0
  name                      = "lifeboat-${var.cluster_name}-dead-letters"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = var.kms_key_arn == "" ? true : null
  kms_master_key_id         = var.kms_key_arn == "" ? null : var.kms_key_arn
  tags                      = var.tags
}

moved {
  from = aws_sqs_queue.notices
  to   = aws_sqs_queue.notices[0]
}

resource "aws_cloudwatch_event_rule" "notices" {
  for_each      = local.rules
  name          = "lifeboat-${var.cluster_name}-${each.key}"
  description   = "Lifeboat: ${each.key} notices to ${local.queue_name}"
  event_pattern = jsonencode(each.value)
  tags          = var.tags
}

resource "aws_cloudwatch_event_target" "notices" {
  for_each  = local.rules
  rule      = aws_cloudwatch_event_rule.notices[each.key].name
  target_id = "lifeboat"
  arn       = local.queue_arn
}

# Only this account's rules above may send to the queue, and only over TLS.
resource "aws_sqs_queue_policy" "notices" {
  count     = local.make_queue ? 1 : 0
  queue_url = aws_sqs_queue.notices[0].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "EventBridgeRules"
        Effect    = "Allow"
        Principal = { Service = "events.amazonaws.com" }
        Action    = "sqs:SendMessage"
        Resource  = aws_sqs_queue.notices[0].arn
        Condition = {
          ArnEquals    = { "aws:SourceArn" = [for r in aws_cloudwatch_event_rule.notices : r.arn] }
          StringEquals = { "aws:SourceAccount" = local.account }
        }
      },
      {
        Sid       = "DenyInsecureTransport"
        Effect    = "Deny"
        Principal = "*"
        Action    = "sqs:*"
        Resource  = aws_sqs_queue.notices[0].arn
        Condition = { Bool = { "aws:SecureTransport" = "false" } }
      },
    ]
  })
}

moved {
  from = aws_sqs_queue_policy.notices
  to   = aws_sqs_queue_policy.notices[0]
}

resource "aws_sqs_queue_policy" "dead_letters" {
  count     = local.make_queue ? 1 : 0
  queue_url = aws_sqs_queue.dead_letters[0].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyInsecureTransport"
      Effect    = "Deny"
      Principal = "*"
      Action    = "sqs:*"
      Resource  = aws_sqs_queue.dead_letters[0].arn
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
}

# A queue whose oldest message grows old is not being read: the controller is down, or cannot
# reach it. A message received three times no longer counts (SQS), so the messages the
# controller keeps on purpose do not hold it up.
resource "aws_cloudwatch_metric_alarm" "oldest_message" {
  alarm_name          = "lifeboat-${var.cluster_name}-oldest-message"
  alarm_description   = "Lifeboat is not reading its queue (docs/operations/troubleshooting.md)"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateAgeOfOldestMessage"
  dimensions          = { QueueName = local.queue_name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 3
  threshold           = var.oldest_message_alarm_seconds
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  count               = local.make_queue ? 1 : 0
  alarm_name          = "lifeboat-${var.cluster_name}-dead-letters"
  alarm_description   = "Messages Lifeboat could not consume moved to the dead-letter queue (docs/operations/troubleshooting.md)"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.dead_letters[0].name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

resource "aws_iam_role" "controller" {
  name                 = var.role_name != "" ? var.role_name : "lifeboat-${var.cluster_name}-${local.region}"
  path                 = var.role_path
  permissions_boundary = var.permissions_boundary_arn != "" ? var.permissions_boundary_arn : null
  description          = "Lifeboat's controller"
  tags                 = var.tags
  # EKS Pod Identity sets these session tags: only this cluster's controller ServiceAccount.
  assume_role_policy = var.credential_mode == "pod-identity" ? jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "pods.eks.amazonaws.com" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
      Condition = {
        StringEquals = {
          "aws:RequestTag/eks-cluster-name"           = var.cluster_name
          "aws:RequestTag/kubernetes-namespace"       = var.namespace
          "aws:RequestTag/kubernetes-service-account" = var.service_account_name
        }
      }
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
  lifecycle {
    # A variable's validation may name only itself before Terraform 1.9.
    precondition {
      condition     = var.credential_mode != "irsa" || var.oidc_provider != ""
      error_message = "credential_mode irsa needs oidc_provider, the cluster's OIDC issuer without https://."
    }
  }
}

resource "aws_iam_role_policy" "controller" {
  name   = "lifeboat"
  role   = aws_iam_role.controller.id
  policy = jsonencode({ Version = "2012-10-17", Statement = local.statements })
}

resource "aws_eks_pod_identity_association" "controller" {
  count           = var.credential_mode == "pod-identity" ? 1 : 0
  cluster_name    = var.cluster_name
  namespace       = var.namespace
  service_account = var.service_account_name
  role_arn        = aws_iam_role.controller.arn
  tags            = var.tags
}
