// SPDX-License-Identifier: Apache-2.0

// Package controlleronly implements package cloud's interfaces for the AWS services only the
// controller calls: EC2 (ownership's instance lookups, status checks, Capacity Blocks, node
// repair's reboots and terminations), EKS (a managed node group's auto repair) and the set-up
// check's EventBridge and SQS reads. They live apart so that the agent's binary links none of these
// services' SDK packages, whose tables are built when a binary starts and stay on its heap
// on every node.
package controlleronly
