package metrics

// ActionTerminateInstance is TerminateInstances on a repaired node's instance
// (NODE_REPAIR_ACTION=terminate), counted by lifeboat_actions_total.
const ActionTerminateInstance = "terminate_instance"
