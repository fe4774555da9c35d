{{/*
The checks of a render. lifeboat.nth.apply runs them all before any template renders, and
lifeboat.refuse fails once, listing every refusal: a values file is fixed in one round.
*/}}

{{/*
The values against the chart's schema (schema/values.json, written by make manifests from
values.yaml and nth/keys.yaml). Checked here, not by helm, which checks values.schema.json
before any template runs and so would say a misspelt key alone. (dict "schema" $schema "value"
$values "path" "" "acc" $acc) -> $acc.unknown (keys neither Lifeboat's nor NTH's) and
$acc.invalid (values of the wrong type, required keys missing).
*/}}
{{- define "lifeboat.check.schema" -}}
{{- $s := .schema }}
{{- $v := .value }}
{{- $where := .path | default "(root)" }}
{{- $types := $s.type | default list }}
{{- if kindIs "string" $types }}{{ $types = list $types }}{{ end }}
{{- $kind := "number" }}
{{- if kindIs "map" $v }}{{ $kind = "object" }}
{{- else if kindIs "slice" $v }}{{ $kind = "array" }}
{{- else if kindIs "bool" $v }}{{ $kind = "boolean" }}
{{- else if kindIs "string" $v }}{{ $kind = "string" }}
{{- else if kindIs "invalid" $v }}{{ $kind = "null" }}{{ end }}
{{- if and $types (not (has $kind $types)) }}
{{- $wanted := last $types }}
{{- if gt (len $types) 1 }}{{ $wanted = printf "%s or %s" (join ", " (initial $types)) (last $types) }}{{ end }}
{{- $_ := set .acc "invalid" (append .acc.invalid (printf "%s: %s given, where %s is wanted" $where $kind $wanted)) }}
{{- else if eq $kind "object" }}
{{- $props := $s.properties | default dict }}
{{- range $k := keys $v | sortAlpha }}
{{- $path := ternary $k (printf "%s.%s" $.path $k) (eq $.path "") }}
{{- if hasKey $props $k }}
{{- $_ := include "lifeboat.check.schema" (dict "schema" (get $props $k) "value" (get $v $k) "path" $path "acc" $.acc) }}
{{- else if eq (toString $s.additionalProperties) "false" }}
{{- $_ := set $.acc "unknown" (append $.acc.unknown (printf "%s: no such value, in Lifeboat's chart or NTH's: check its spelling" $path)) }}
{{- end }}
{{- end }}
{{- range $k := $s.required | default list }}
{{- if not (hasKey $v $k) }}{{ $_ := set $.acc "invalid" (append $.acc.invalid (printf "%s: %s is required" $where $k)) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Whether an enabled component serves /metrics: alert rules, a dashboard or a monitor over
metrics nobody serves would render and stay silent. (dict "root" $ "components" (list ...))
*/}}
{{- define "lifeboat.metricsServed" -}}
{{- range $component := .components }}
{{- if (index $.root.Values $component).enabled }}
{{- $cfg := include "lifeboat.effectiveConfig" (dict "root" $.root "component" $component) | fromYaml }}
{{- if include "lifeboat.on" (dict "config" $cfg "key" "enablePrometheusServer") }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A requested Prometheus Operator object renders whether or not the cluster serves its kind, as
NTH's chart renders its monitors: helm template (Argo CD, a CI check) has no cluster to ask.
Installed into a cluster (helm reaches it: its default Namespace can be read) that serves no
monitoring.coreos.com/v1 <kind>, the install is refused naming the key, rather than failing
with the API server's "no matches for kind". (dict "root" $ "kind" "PodMonitor" "key"
"podMonitor.create") -> the refusal, or nothing.
*/}}
{{- define "lifeboat.monitorAPIMissing" -}}
{{- $api := printf "monitoring.coreos.com/v1/%s" .kind }}
{{- if and (not (.root.Capabilities.APIVersions.Has $api)) (lookup "v1" "Namespace" "" "default") }}
{{- printf "%s is true, and the cluster serves no %s (the Prometheus Operator's CRDs are not installed): install the CRDs first, or set %s=false" .key $api .key }}
{{- end }}
{{- end }}

{{/*
The refusal when the cluster lacks ValidatingAdmissionPolicy, which the value named needs:
(dict "root" $ "key" "agent.nodeRestriction.enabled" "what" "the agent's node restriction").
An offline render cannot know the target cluster (its .Capabilities are Helm's defaults, whose
version says nothing of the cluster), so it never leaves a policy out. Where .Capabilities are
a cluster's (helm install and upgrade, template --validate, --dry-run=server: the API list then
names resources, such as v1/Node, besides group versions) and that cluster does not serve
ValidatingAdmissionPolicy, the render is refused with the setting that installs without it.
*/}}
{{- define "lifeboat.admissionPolicyMissing" -}}
{{- $root := .root }}
{{- $apis := $root.Capabilities.APIVersions }}
{{- if and ($apis.Has "v1/Node") (not ($apis.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")) }}
{{- $was := "" }}
{{- if and (eq .key "agent.nodeRestriction.enabled") (hasKey $root.Values.agent.nodeRestriction "required") (not $root.Values.agent.nodeRestriction.required) }}
{{- $was = " (agent.nodeRestriction.required=false no longer leaves it out)" }}
{{- end }}
{{- $without := ternary " (every agent's token may then write any Node and delete any pod)" "" (eq .key "agent.nodeRestriction.enabled") }}
{{- printf "Kubernetes %s does not serve ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.30 and later), which %s needs%s: upgrade the cluster, or set %s=false to install without it%s" $root.Capabilities.KubeVersion.Version .what $was .key $without }}
{{- end }}
{{- end }}

{{/*
Whether the cluster serves flowcontrol.apiserver.k8s.io/v1 FlowSchema (Kubernetes 1.29 and
later), or nothing says it does not: an offline render holds the FlowSchema, as it holds the
ServiceMonitor; an API list that is a cluster's (it names resources such as v1/Node) and lacks
it leaves it out, and NOTES say so.
*/}}
{{- define "lifeboat.flowControlServed" -}}
{{- $apis := .Capabilities.APIVersions }}
{{- if or ($apis.Has "flowcontrol.apiserver.k8s.io/v1/FlowSchema") (not ($apis.Has "v1/Node")) }}true{{ end }}
{{- end }}

{{/*
A workload's rollout strategy: the one given, else the chart's. On the host network a surge
pod would wait for the old pod's ports forever, so a maxSurge above 0 is refused there.
(dict "root" $ "component" "agent") -> JSON {strategy, refusal}.
*/}}
{{- define "lifeboat.strategyOf" -}}
{{- $values := index .root.Values .component }}
{{- $key := ternary "agent.updateStrategy" "controller.strategy" (eq .component "agent") }}
{{- $given := ternary $values.updateStrategy $values.strategy (eq .component "agent") }}
{{- $default := dict "type" "RollingUpdate" "rollingUpdate" (dict "maxUnavailable" 1 "maxSurge" (ternary 0 1 (or (eq .component "agent") $values.hostNetwork))) }}
{{- /* Kubernetes' maxSurge when a strategy names none: 0 for a DaemonSet, 25% for a Deployment. */}}
{{- $surgeDefault := ternary "0" "25%" (eq .component "agent") }}
{{- $s := $given | default $default }}
{{- $refusal := "" }}
{{- if and $values.hostNetwork $s.rollingUpdate }}
{{- $surge := toString (hasKey $s.rollingUpdate "maxSurge" | ternary $s.rollingUpdate.maxSurge $surgeDefault) }}
{{- if not (has $surge (list "0" "0%")) }}
{{- $refusal = printf "%s: maxSurge %s with hostNetwork: the new pod would wait for the old pod's host ports forever; use maxSurge 0" $key $surge }}
{{- end }}
{{- end }}
{{- toJson (dict "strategy" $s "refusal" $refusal) }}
{{- end }}

{{/* The controller's memory limit that docs/deploy.md ("The controller's memory") sizes. */}}
{{- define "lifeboat.controllerMemorySizing" -}}512Mi{{- end }}

{{/*
A Kubernetes quantity in bytes (a float), or nothing when the chart cannot read it (the API
server then judges it).
*/}}
{{- define "lifeboat.bytes" -}}
{{- if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) }}{{ float64 . }}
{{- else }}
{{- $q := toString . | trim }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $q }}
{{- $suffix := trimPrefix $number $q }}
{{- $scale := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 "m" 0.001 }}
{{- if regexMatch "^[eE][0-9]+$" $suffix }}
{{- $m := 1.0 }}
{{- range until (int (substr 1 -1 $suffix)) }}{{ $m = mulf $m 10 }}{{ end }}
{{- $_ := set $scale $suffix $m }}
{{- end }}
{{- if and $number (hasKey $scale $suffix) }}{{ mulf (float64 $number) (get $scale $suffix) }}{{ end }}
{{- end }}
{{- end }}

{{/*
When the controller's memory limit is below what it is sized for, what to say of it (the
Deployment's annotation lifeboat.dev/resources-below-sizing, NOTES and lifeboat status say
it); else nothing. The limit is kept as written.
*/}}
{{- define "lifeboat.belowSizing" -}}
{{- if .Values.controller.enabled }}
{{- $limit := dig "limits" "memory" "" (.Values.controller.resources | default dict) }}
{{- $sizing := include "lifeboat.controllerMemorySizing" . }}
{{- $bytes := include "lifeboat.bytes" $limit }}
{{- if and $limit $bytes (lt (float64 $bytes) (float64 (include "lifeboat.bytes" $sizing))) }}
{{- $from := "controller.resources" }}
{{- with .lifeboatNTH }}{{ if has "resources" .given }}{{ $from = "NTH's resources" }}{{ end }}{{ end }}
{{- printf "memory limit %s (%s) is below %s, the size for an Availability Zone reclaimed at once (docs/deploy.md, \"The controller's memory\"); kept as written" (toString $limit) $from $sizing }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Every check of the values that reads more than one of them: (dict "root" $ "acc" $acc) ->
$acc.problems, and $acc.skipped for the monitors this mode leaves out.
*/}}
{{- define "lifeboat.check.values" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $p := list }}
{{- /* Monitors scrape one workload; for the other mode's they are skipped, as NTH's chart
skips them, so that a values file shared by both modes renders. */}}
{{- range $m := list (dict "key" "serviceMonitor.create" "kind" "ServiceMonitor" "component" "controller" "scrapes" "the controller" "other" "podMonitor.create scrapes the agents" "metrics" "the controller's")
                      (dict "key" "podMonitor.create" "kind" "PodMonitor" "component" "agent" "scrapes" "the agents" "other" "serviceMonitor.create scrapes the controller" "metrics" "the agents'") }}
{{- if (index $v (first (splitList "." $m.key))).create }}
{{- if not (index $v $m.component).enabled }}
{{- $_ := set $.acc "skipped" (append $.acc.skipped (printf "%s: skipped: the %s scrapes %s, and %s.enabled is false (%s)" $m.key $m.kind $m.scrapes $m.component $m.other)) }}
{{- else }}
{{- if not (include "lifeboat.metricsServed" (dict "root" $root "components" (list $m.component))) }}
{{- $p = append $p (printf "%s needs %s metrics: set config.enablePrometheusServer (NTH: enablePrometheusServer) to true" $m.key $m.metrics) }}
{{- end }}
{{- with include "lifeboat.monitorAPIMissing" (dict "root" $root "kind" $m.kind "key" $m.key) }}{{ $p = append $p . }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key := list "prometheusRule.enabled" "dashboard.enabled" }}
{{- if (index $v (first (splitList "." $key))).enabled }}
{{- if not (include "lifeboat.metricsServed" (dict "root" $root "components" (list "controller" "agent"))) }}
{{- $p = append $p (printf "%s needs Lifeboat's metrics, and the metrics server is off: set config.enablePrometheusServer (ENABLE_PROMETHEUS_SERVER) to true" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.prometheusRule.enabled }}
{{- with include "lifeboat.monitorAPIMissing" (dict "root" $root "kind" "PrometheusRule" "key" "prometheusRule.enabled") }}{{ $p = append $p . }}{{ end }}
{{- end }}
{{- /* The admission policies. */}}
{{- range $policy := list (dict "on" (and $v.agent.enabled $v.agent.nodeRestriction.enabled) "key" "agent.nodeRestriction.enabled" "what" "the agent's node restriction")
                           (dict "on" $v.nodeProviderIDPolicy.enabled "key" "nodeProviderIDPolicy.enabled" "what" "the providerID policy")
                           (dict "on" $v.conditionWriterPolicy.enabled "key" "conditionWriterPolicy.enabled" "what" "the condition writers' policy") }}
{{- if $policy.on }}
{{- with include "lifeboat.admissionPolicyMissing" (dict "root" $root "key" $policy.key "what" $policy.what) }}{{ $p = append $p . }}{{ end }}
{{- end }}
{{- end }}
{{- if $v.conditionWriterPolicy.enabled }}
{{- if not $v.conditionWriterPolicy.serviceAccounts }}
{{- $p = append $p "conditionWriterPolicy.enabled needs conditionWriterPolicy.serviceAccounts: the node agents' ServiceAccounts as namespace/name (node-problem-detector, the EKS node monitoring agent)" }}
{{- end }}
{{- range $v.conditionWriterPolicy.serviceAccounts }}
{{- if ne (len (splitList "/" (toString .))) 2 }}{{ $p = append $p (printf "conditionWriterPolicy.serviceAccounts: %q is not namespace/name" (toString .)) }}{{ end }}
{{- end }}
{{- end }}
{{- /* The webhook template from a ConfigMap. */}}
{{- with $v.webhookTemplateConfigMap.name }}
{{- if not $v.webhookTemplateConfigMap.key }}
{{- $p = append $p "webhookTemplateConfigMap.key is required with webhookTemplateConfigMap.name" }}
{{- end }}
{{- if or $v.config.webhookTemplateFile $v.agent.config.webhookTemplateFile $v.controller.config.webhookTemplateFile }}
{{- $p = append $p "webhookTemplateConfigMap and config.webhookTemplateFile both name the webhook template: keep one" }}
{{- end }}
{{- end }}
{{- /* Settings the chart sets itself. */}}
{{- range $where := list "config" "agent.config" "controller.config" }}
{{- $cfg := ternary $v.config (index $v (first (splitList "." $where))).config (eq $where "config") }}
{{- range $key := list "nodeName" "podName" "namespace" "enableSqsTerminationDraining" }}
{{- if hasKey $cfg $key }}
{{- $p = append $p (printf "%s.%s: setting %q is set by the chart (from the Downward API, or the component's mode): remove it" $where $key $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* Each enabled workload. */}}
{{- range $component := list "agent" "controller" }}
{{- $c := index $v $component }}
{{- if $c.enabled }}
{{- with (include "lifeboat.strategyOf" (dict "root" $root "component" $component) | fromJson).refusal }}{{ $p = append $p . }}{{ end }}
{{- $names := list }}
{{- range $c.extraEnv }}
{{- if has .name $names }}{{ $p = append $p (printf "%s.extraEnv names %s twice: keep one" $component .name) }}{{ end }}
{{- $names = append $names .name }}
{{- end }}
{{- if and (not $c.serviceAccount.create) (not $c.serviceAccount.name) }}
{{- $p = append $p (printf "%s.serviceAccount.name is required when %s.serviceAccount.create is false" $component $component) }}
{{- end }}
{{- end }}
{{- end }}
{{- $p = concat $p (include "lifeboat.check.selectors" $root | fromYamlArray) }}
{{- $_ := set .acc "problems" $p }}
{{- end }}

{{/*
nthLabels, and the selectors it gives: a workload's selector cannot change, so where the
installed workload (read from the cluster, when helm reaches one) selects otherwise, the render
is refused with what keeps the selector or lets it change. A YAML list of refusals.
*/}}
{{- define "lifeboat.check.selectors" -}}
{{- $p := list }}
{{- if not (kindIs "bool" .Values.nthLabels) }}
{{- $p = append $p (printf "nthLabels: %s: true, false, or null (NTH's labels when the values carry NTH's keys)" (toJson .Values.nthLabels)) }}
{{- else }}
{{- range $w := list (dict "component" "agent" "kind" "DaemonSet" "resource" "daemonset") (dict "component" "controller" "kind" "Deployment" "resource" "deployment") }}
{{- if (index $.Values $w.component).enabled }}
{{- $ctx := dict "root" $ "component" $w.component }}
{{- $name := include "lifeboat.componentName" $ctx }}
{{- $live := lookup "apps/v1" $w.kind $.Release.Namespace $name }}
{{- $want := include "lifeboat.selectorLabels" $ctx | fromYaml }}
{{- $have := dig "spec" "selector" "matchLabels" (dict) $live }}
{{- if and $live (ne (toJson $have) (toJson $want)) }}
{{- /* The selector the other nthLabels gives: named when it is the installed one. */}}
{{- $on := $.Values.nthLabels }}
{{- $_ := set $.Values "nthLabels" (not $on) }}
{{- $other := include "lifeboat.selectorLabels" $ctx | fromYaml }}
{{- $_ := set $.Values "nthLabels" $on }}
{{- $keep := ternary (printf "set nthLabels=%v to keep it, or " (not $on)) "" (eq (toJson $have) (toJson $other)) }}
{{- $p = append $p (printf "nthLabels: the %s %s/%s selects %s, and these values give it %s; a selector cannot change: %sdelete the %s first (kubectl -n %s delete %s %s; its nodes are unprotected until the new pods are Ready)" $w.kind $.Release.Namespace $name (toJson $have) (toJson $want) $keep $w.kind $.Release.Namespace $w.resource $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $p }}
{{- end }}

{{/*
Fails once with every refusal of the render: (dict "check" $check "s" $nthState).
*/}}
{{- define "lifeboat.refuse" -}}
{{- $c := .check }}
{{- $s := .s }}
{{- $sections := list }}
{{- $count := 0 }}
{{- range $section := list (list "values this chart does not know, or of the wrong type" (concat $c.unknown $c.invalid))
                            (list "aws-node-termination-handler values that Lifeboat's chart cannot take" $s.refused)
                            (list "aws-node-termination-handler values that would lower protection without a word" $s.lost)
                            (list "values that cannot be rendered as they are" $c.problems) }}
{{- $items := index $section 1 }}
{{- if $items }}
{{- $count = add $count (len $items) }}
{{- $sections = append $sections (printf "%s:\n  %s" (index $section 0) (join "\n  " $items)) }}
{{- end }}
{{- end }}
{{- if $sections }}
{{- $after := ternary "\n(the other checks run once every value has the type the chart wants)" "" (not (empty $c.invalid)) }}
{{- fail (printf "%d problem(s) with these values, all of them here:\n%s%s" $count (join "\n" $sections) $after) }}
{{- end }}
{{- end }}
