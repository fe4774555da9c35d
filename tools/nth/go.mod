module lifeboat.dev/tools/nth

// NTH's source at the version Lifeboat is compatible with: its Helm chart's values, its
// webhook template fields and kinds. Tests read them from the module cache (test/nth); nothing
// here is built.

go 1.26.8

require github.com/aws/aws-node-termination-handler v1.25.1
