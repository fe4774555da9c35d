{{/*
aws-node-termination-handler's values, taken onto Lifeboat's (nth/keys.yaml says what each
becomes). Every template file includes "lifeboat.nth.apply" first: the first include rewrites
.Values in place and records what it did on the root context, so that every template, NOTES
included, reads the same values whichever helm renders first.
*/}}

{{/* Lifeboat's image, which replaces NTH's own when a values file names NTH's. */}}
{{- define "lifeboat.nth.defaultRepository" -}}ghcr.io/lifeboat-dev/lifeboat{{- end }}

{{/* NTH's image, as its chart's default names it. */}}
{{- define "lifeboat.nth.repository" -}}public.ecr.aws/aws-ec2/aws-node-termination-handler{{- end }}

{{/* The value at a dotted path of a map: (dict "values" $m "path" "a.b"), as JSON, or nothing. */}}
{{- define "lifeboat.nth.lookup" -}}
{{- $v := .values }}
{{- $found := true }}
{{- range $part := splitList "." .path }}
{{- if and $found (kindIs "map" $v) (hasKey $v $part) }}{{ $v = index $v $part }}{{ else }}{{ $found = false }}{{ end }}
{{- end }}
{{- if and $found (not (kindIs "invalid" $v)) }}{{ toJson (dict "v" $v) }}{{ end }}
{{- end }}

{{/* Sets a dotted path of a map, creating maps on the way: (dict "values" $m "path" "a.b" "value" $x). */}}
{{- define "lifeboat.nth.put" -}}
{{- $m := .values }}
{{- $parts := splitList "." .path }}
{{- range $p := initial $parts }}
{{- if not (kindIs "map" (get $m $p)) }}{{ $_ := set $m $p dict }}{{ end }}
{{- $m = get $m $p }}
{{- end }}
{{- $v := .value }}
{{- if or (kindIs "map" $v) (kindIs "slice" $v) }}{{ $v = deepCopy $v }}{{ end }}
{{- $_ := set $m (last $parts) $v }}
{{- end }}

{{/* NTH's drain sources in IMDS mode, and what each drains on. */}}
{{- define "lifeboat.nth.drainSources" -}}
enableSpotInterruptionDraining: Spot interruption notices
enableScheduledEventDraining: scheduled maintenance events
enableRebalanceMonitoring: rebalance recommendations (cordon)
enableRebalanceDraining: rebalance recommendations (drain)
enableASGLifecycleDraining: the Auto Scaling target lifecycle state
{{- end }}

{{/*
The ServiceAccount NTH's chart names for this release and these values when it creates one:
its full name (fullnameOverride; else the release name when it contains the chart name or
nameOverride, else "<release>-<that name>"), cut to 63 characters. serviceAccount.name, when
given, is taken as it is elsewhere.
*/}}
{{- define "lifeboat.nth.serviceAccountName" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default "aws-node-termination-handler" .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lifeboat.nth.apply" -}}
{{- if not (hasKey $ "lifeboatNTH") }}
{{- $table := .Files.Get "nth/keys.yaml" | fromYaml }}
{{- $given := dict }}
{{- $present := list }}
{{- range $key, $entry := $table }}
{{- $json := include "lifeboat.nth.lookup" (dict "values" $.Values "path" $key) }}
{{- if $json }}
{{- $v := get (fromJson $json) "v" }}
{{- if not $entry.same }}{{ $present = append $present $key }}{{ end }}
{{- /* A drain source named in the values file counts even at NTH's default: NTH's default
is not Lifeboat's for all of them, and what the file asks for is kept. */}}
{{- if or (ne (toJson $v) (toJson $entry.default)) (has $key (include "lifeboat.nth.drainSources" $ | fromYaml | keys)) }}{{ $_ := set $given $key $v }}{{ end }}
{{- end }}
{{- end }}

{{- /* Keys with no equivalent: refuse them all at once, each with what to use instead. */}}
{{- $refused := list }}
{{- range $key := keys $given | sortAlpha }}
{{- $entry := get $table $key }}
{{- if $entry.refuse }}{{ $refused = append $refused (printf "%s: %s" $key $entry.refuse) }}{{ end }}
{{- end }}
{{- $repo := toString .Values.image.repository }}
{{- $tag := toString (.Values.image.tag | default "") }}
{{- if and (ne $repo (include "lifeboat.nth.repository" .)) (regexMatch "^v1\\.[0-9]+\\.[0-9]+" $tag) }}
{{- $refused = append $refused (printf "image.tag: %q is a release of NTH (v1.x.y); Lifeboat's releases are 0.x and its image tags have no leading v: leave image.tag out to run the image of this chart's version (%s), or name one of Lifeboat's tags" $tag .Chart.AppVersion) }}
{{- end }}
{{- if and (contains "aws-node-termination-handler" $repo) (ne $repo (include "lifeboat.nth.repository" .)) }}
{{- $refused = append $refused (printf "image.repository: %q looks like NTH's image; name Lifeboat's image (default %s) or leave image.repository out" $repo (include "lifeboat.nth.defaultRepository" .)) }}
{{- end }}
{{- if and (eq $repo (include "lifeboat.nth.repository" .)) .Values.image.tag }}
{{- $refused = append $refused (printf "image.tag: %q is a tag of NTH's image (image.repository is NTH's); leave both out to run Lifeboat's image of this chart's version, or name Lifeboat's image and tag" (toString .Values.image.tag)) }}
{{- end }}
{{- with get $given "podDisruptionBudget" }}
{{- if ne (toJson .) (toJson (dict "maxUnavailable" 1)) }}
{{- $refused = append $refused (printf "podDisruptionBudget: %s: Lifeboat's controller has its own budget, maxUnavailable 1 (controller.podDisruptionBudget.enabled), so that the budget never blocks draining the node the controller runs on; remove podDisruptionBudget" (toJson .)) }}
{{- end }}
{{- end }}
{{- /* NTH's chart passes a deprecated key's variable and its replacement's (at its default)
alike, and NTH's binary then takes the replacement: the deprecated key alone had no effect. */}}
{{- range $pair := list (list "checkASGTagBeforeDraining" "checkTagBeforeDraining") (list "managedAsgTag" "managedTag") }}
{{- $old := index $pair 0 }}
{{- $new := index $pair 1 }}
{{- if and (hasKey $given $old) (not (hasKey $given $new)) }}
{{- $refused = append $refused (printf "%s: %s had no effect in NTH: its chart passes %s (%s) as well, and NTH takes that one. Set %s: %s to have Lifeboat do what this asks, or remove %s to keep what NTH did" $old (toJson (get $given $old)) $new (toJson (get $table $new).default) $new (toJson (get $given $old)) $old) }}
{{- end }}
{{- end }}
{{- if and (or (hasKey $given "webhookTemplateConfigMapName") (hasKey $given "webhookTemplateConfigMapKey")) (not (and (hasKey $given "webhookTemplateConfigMapName") (hasKey $given "webhookTemplateConfigMapKey"))) }}
{{- $refused = append $refused "webhookTemplateConfigMapName and webhookTemplateConfigMapKey: set both (the ConfigMap and its key holding the template), or neither" }}
{{- end }}
{{- if $refused }}
{{- fail (printf "aws-node-termination-handler values that Lifeboat's chart cannot take:\n  %s" (join "\n  " $refused)) }}
{{- end }}

{{- $applied := list }}
{{- $ignored := list }}
{{- $special := list "enableSqsTerminationDraining" "podLabels" "podAnnotations" "linuxPodLabels" "linuxPodAnnotations"
  "nodeSelector" "daemonsetNodeSelector" "linuxNodeSelector" "affinity" "daemonsetAffinity" "linuxAffinity"
  "tolerations" "daemonsetTolerations" "linuxTolerations" "probes" "webhookURLSecretName" "webhookTemplate"
  "webhookTemplateConfigMapName" "webhookTemplateConfigMapKey" "checkASGTagBeforeDraining" "checkTagBeforeDraining"
  "managedAsgTag" "managedTag" "podDisruptionBudget" "dnsPolicy" "linuxDnsPolicy" "serviceAccount.name" }}
{{- range $key := keys $given | sortAlpha }}
{{- $entry := get $table $key }}
{{- $v := get $given $key }}
{{- if $entry.ignored }}
{{- $ignored = append $ignored (printf "%s: %s" $key $entry.ignored) }}
{{- else if and $entry.to (not (has $key $special)) }}
{{- range $to := $entry.to }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" $to "value" $v) }}
{{- $applied = append $applied (printf "%s -> %s = %s" $key $to (toJson $v)) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Queue mode: the controller Deployment instead of the agent DaemonSet. */}}
{{- if hasKey $given "enableSqsTerminationDraining" }}
{{- $on := eq (toString (get $given "enableSqsTerminationDraining")) "true" }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" "controller.enabled" "value" $on) }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" "agent.enabled" "value" (not $on)) }}
{{- $applied = append $applied (printf "enableSqsTerminationDraining -> controller.enabled = %v, agent.enabled = %v" $on (not $on)) }}
{{- end }}

{{- /* Pod labels and annotations: both workloads; linux* only the DaemonSet (NTH merges them). */}}
{{- range $what := list "Labels" "Annotations" }}
{{- $plain := get $given (printf "pod%s" $what) | default dict }}
{{- $linux := get $given (printf "linuxPod%s" $what) | default dict }}
{{- if or $plain $linux }}
{{- $agent := mergeOverwrite (deepCopy (index $.Values.agent (printf "pod%s" $what) | default dict)) $plain $linux }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" (printf "agent.pod%s" $what) "value" $agent) }}
{{- $applied = append $applied (printf "pod%s, linuxPod%s -> agent.pod%s = %s" $what $what $what (toJson $agent)) }}
{{- if $plain }}
{{- $controller := mergeOverwrite (deepCopy (index $.Values.controller (printf "pod%s" $what) | default dict)) $plain }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" (printf "controller.pod%s" $what) "value" $controller) }}
{{- $applied = append $applied (printf "pod%s -> controller.pod%s = %s" $what $what (toJson $controller)) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Placement. NTH's DaemonSet takes linuxX if set, else X if set, else daemonsetX (whose
defaults equal the agent's); its Deployment takes X. */}}
{{- range $what := list "NodeSelector" "Affinity" "Tolerations" }}
{{- $lower := printf "%s%s" (lower (substr 0 1 $what)) (substr 1 -1 $what) }}
{{- if or (hasKey $given $lower) (hasKey $given (printf "linux%s" $what)) (hasKey $given (printf "daemonset%s" $what)) }}
{{- $effective := get $given (printf "linux%s" $what) }}
{{- if not $effective }}{{ $effective = get $given $lower }}{{ end }}
{{- if not $effective }}
{{- $effective = (get $table (printf "daemonset%s" $what)).default }}
{{- if hasKey $given (printf "daemonset%s" $what) }}{{ $effective = get $given (printf "daemonset%s" $what) }}{{ end }}
{{- end }}
{{- if eq $what "NodeSelector" }}{{ $effective = merge (dict "kubernetes.io/os" "linux") ($effective | default dict) }}{{ end }}
{{- if ne (toJson $effective) (toJson (get $.Values.agent $lower)) }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" (printf "agent.%s" $lower) "value" $effective) }}
{{- $applied = append $applied (printf "linux%s, %s, daemonset%s -> agent.%s = %s" $what $lower $what $lower (toJson $effective)) }}
{{- end }}
{{- end }}
{{- with get $given $lower }}
{{- $v := . }}
{{- if eq $what "NodeSelector" }}{{ $v = merge (dict "kubernetes.io/os" "linux") . }}{{ end }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" (printf "controller.%s" $lower) "value" $v) }}
{{- $applied = append $applied (printf "%s -> controller.%s = %s" $lower $lower (toJson $v)) }}
{{- end }}
{{- end }}

{{- /* NTH's liveness probe: its path and port are the probes server's settings; the rest are
the probe's timings. */}}
{{- with get $given "probes" }}
{{- $probe := deepCopy . }}
{{- with $probe.httpGet }}
{{- if .path }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" "config.probesServerEndpoint" "value" .path) }}
{{- $applied = append $applied (printf "probes.httpGet.path -> config.probesServerEndpoint = %s" (toJson .path)) }}
{{- end }}
{{- if .port }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" "config.probesServerPort" "value" .port) }}
{{- $applied = append $applied (printf "probes.httpGet.port -> config.probesServerPort = %s" (toJson .port)) }}
{{- end }}
{{- end }}
{{- $timings := omit $probe "httpGet" }}
{{- if $timings }}
{{- range $component := list "agent" "controller" }}
{{- $merged := mergeOverwrite (deepCopy (index $.Values $component).livenessProbe) $timings }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" (printf "%s.livenessProbe" $component) "value" $merged) }}
{{- $applied = append $applied (printf "probes -> %s.livenessProbe = %s" $component (toJson $merged)) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* The webhook: a URL from a Secret (NTH's key webhookurl), and templates written for NTH,
which then see NTH's kind names. */}}
{{- with get $given "webhookURLSecretName" }}
{{- $ref := dict "name" . "key" "webhookurl" }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" "configFromSecret.webhookUrl" "value" $ref) }}
{{- $applied = append $applied (printf "webhookURLSecretName -> configFromSecret.webhookUrl = %s" (toJson $ref)) }}
{{- end }}
{{- if hasKey $given "webhookTemplateConfigMapName" }}
{{- $ref := dict "name" (get $given "webhookTemplateConfigMapName") "key" (get $given "webhookTemplateConfigMapKey") }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" "webhookTemplateConfigMap" "value" $ref) }}
{{- $applied = append $applied (printf "webhookTemplateConfigMapName, webhookTemplateConfigMapKey -> webhookTemplateConfigMap = %s" (toJson $ref)) }}
{{- else if hasKey $given "webhookTemplate" }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" "config.webhookTemplate" "value" (get $given "webhookTemplate")) }}
{{- $applied = append $applied "webhookTemplate -> config.webhookTemplate" }}
{{- end }}
{{- if or (hasKey $given "webhookTemplate") (hasKey $given "webhookTemplateConfigMapName") }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" "config.webhookNthKinds" "value" true) }}
{{- $applied = append $applied "webhookTemplate -> config.webhookNthKinds = true (the template sees NTH's .Kind and .Monitor values)" }}
{{- end }}

{{- /* NTH's deprecated names lose to the current ones. */}}
{{- range $pair := list (list "checkTagBeforeDraining" "checkASGTagBeforeDraining") (list "managedTag" "managedAsgTag") }}
{{- $key := "" }}
{{- if hasKey $given (index $pair 0) }}{{ $key = index $pair 0 }}{{ else if hasKey $given (index $pair 1) }}{{ $key = index $pair 1 }}{{ end }}
{{- if $key }}
{{- include "lifeboat.nth.put" (dict "values" $.Values "path" (printf "config.%s" (index $pair 0)) "value" (get $given $key)) }}
{{- $applied = append $applied (printf "%s -> config.%s = %s" $key (index $pair 0) (toJson (get $given $key))) }}
{{- end }}
{{- end }}

{{- if hasKey $given "podDisruptionBudget" }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" "controller.podDisruptionBudget.enabled" "value" true) }}
{{- $applied = append $applied "podDisruptionBudget -> controller.podDisruptionBudget.enabled = true (maxUnavailable 1)" }}
{{- end }}

{{- /* The DaemonSet's DNS policy: dnsPolicy if set, else linuxDnsPolicy. */}}
{{- if or (hasKey $given "dnsPolicy") (hasKey $given "linuxDnsPolicy") }}
{{- $policy := get $given "dnsPolicy" | default (get $given "linuxDnsPolicy") }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" "agent.dnsPolicy" "value" $policy) }}
{{- $applied = append $applied (printf "dnsPolicy, linuxDnsPolicy -> agent.dnsPolicy = %s" (toJson $policy)) }}
{{- end }}

{{- /* NTH's defaults of keys this chart shares give way to this chart's own. */}}
{{- range $key, $entry := $table }}
{{- if and (hasKey $entry "restore") (not (hasKey $given $key)) (include "lifeboat.nth.lookup" (dict "values" $.Values "path" $key)) }}
{{- $parent := index $.Values (first (splitList "." $key)) }}
{{- if kindIs "invalid" $entry.restore }}{{ $_ := unset $parent (last (splitList "." $key)) }}{{ else }}{{ $_ := set $parent (last (splitList "." $key)) $entry.restore }}{{ end }}
{{- end }}
{{- end }}

{{- /* NTH's own image is never what a Lifeboat release should run. */}}
{{- if eq $repo (include "lifeboat.nth.repository" .) }}
{{- $_ := set .Values.image "repository" (include "lifeboat.nth.defaultRepository" .) }}
{{- $applied = append $applied (printf "image.repository %s (NTH's image) -> %s" $repo (include "lifeboat.nth.defaultRepository" .)) }}
{{- end }}

{{- /* NTH's identity: the workload that needs AWS credentials in this mode (the controller
in queue mode, else the agent, which completes lifecycle actions) runs as the ServiceAccount NTH's
chart would name for this release and these values, so that an IAM role's trust policy (IRSA) or
a Pod Identity association made for NTH still matches. The other workload keeps its own name. */}}
{{- if $present }}
{{- $credential := ternary "controller" "agent" (eq (toString .Values.controller.enabled) "true") }}
{{- $other := ternary "agent" "controller" (eq $credential "controller") }}
{{- $sa := (index .Values $credential).serviceAccount }}
{{- if hasKey $given "serviceAccount.name" }}
{{- $name := get $given "serviceAccount.name" }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" (printf "%s.serviceAccount.name" $credential) "value" $name) }}
{{- $applied = append $applied (printf "serviceAccount.name -> %s.serviceAccount.name = %s" $credential (toJson $name)) }}
{{- if not (index .Values $other).serviceAccount.create }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" (printf "%s.serviceAccount.name" $other) "value" $name) }}
{{- $applied = append $applied (printf "serviceAccount.name -> %s.serviceAccount.name = %s (serviceAccount.create is false: an existing account)" $other (toJson $name)) }}
{{- end }}
{{- else if and $sa.create (not $sa.name) }}
{{- $name := include "lifeboat.nth.serviceAccountName" . }}
{{- include "lifeboat.nth.put" (dict "values" .Values "path" (printf "%s.serviceAccount.name" $credential) "value" $name) }}
{{- $applied = append $applied (printf "(NTH's ServiceAccount) -> %s.serviceAccount.name = %s, the name NTH's chart gives this release" $credential (toJson $name)) }}
{{- end }}
{{- end }}

{{- /* No silent loss of protection: a drain source NTH's values turn on (given, or left at
NTH's default) that the agent would leave off fails the render, naming the key and the values
that settle it either way. */}}
{{- if and $present .Values.agent.enabled (not (eq (toString (get $given "enableSqsTerminationDraining")) "true")) }}
{{- $cfg := include "lifeboat.effectiveConfig" (dict "root" $ "component" "agent") | fromYaml }}
{{- $lost := list }}
{{- range $key, $what := include "lifeboat.nth.drainSources" $ | fromYaml }}
{{- $entry := get $table $key }}
{{- $setting := trimPrefix "config." (first $entry.to) }}
{{- $nthOn := eq (toString $entry.default) "true" }}
{{- $json := include "lifeboat.nth.lookup" (dict "values" $.Values "path" $key) }}
{{- if $json }}{{ $nthOn = eq (toString (get (fromJson $json) "v")) "true" }}{{ end }}
{{- if and $nthOn (not (include "lifeboat.on" (dict "config" $cfg "key" $setting))) }}
{{- if $json }}
{{- $lost = append $lost (printf "%s: true asks the agent to drain on %s, and config.%s or agent.config.%s turns it off: remove the override, or set %s: false" $key $what $setting $setting $key) }}
{{- else }}
{{- $lost = append $lost (printf "%s: left out, NTH drains on %s (its default is true) and Lifeboat's agent would not (its default is false): set %s: true to keep draining on it, or %s: false to accept Lifeboat's default" $key $what $key $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if $lost }}
{{- fail (printf "aws-node-termination-handler values that would lower protection without a word:\n  %s" (join "\n  " $lost)) }}
{{- end }}
{{- end }}

{{- $_ := set $ "lifeboatNTH" (dict "applied" $applied "ignored" $ignored "present" $present "given" (keys $given)) }}
{{- end }}
{{- end }}
