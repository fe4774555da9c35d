output "queue_url" {
  description = "config.queueUrl (QUEUE_URL)."
  value       = aws_sqs_queue.notices.url
}

output "role_arn" {
  description = "For irsa: controller.serviceAccount.annotations.\"eks.amazonaws.com/role-arn\"."
  value       = aws_iam_role.controller.arn
}
