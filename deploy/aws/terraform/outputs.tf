output "queue_url" {
  description = "config.queueUrl (QUEUE_URL)."
  value       = local.queue_url
}

output "queue_arn" {
  description = "The queue the rules send to and the role reads."
  value       = local.queue_arn
}

output "dead_letter_queue_url" {
  description = "Messages the controller could not consume (docs/operations/troubleshooting.md); null with existing_queue_arn."
  value       = local.make_queue ? aws_sqs_queue.dead_letters[0].url : null
}

output "role_arn" {
  description = "For irsa: controller.serviceAccount.annotations.\"eks.amazonaws.com/role-arn\"."
  value       = aws_iam_role.controller.arn
}
