{{/*
aws-node-termination-handler's values, taken onto Lifeboat's (nth/keys.yaml says what each
becomes). Every template file includes "lifeboat.nth.apply" first: the first include checks the
values, rewrites .Values in place and records what it did on the root context, so that every
template, NOTES included, reads the same values whichever helm renders first. Every value a
file sets is taken as written, at NTH's default too; an empty one ({}, [], "", null) counts as
left out, as NTH's own templates render nothing for it.
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


{{/* Whether a value counts as left out: null, or an empty map, list or string. */}}
{{- define "lifeboat.nth.empty" -}}
{{- if or (kindIs "invalid" .) (and (or (kindIs "map" .) (kindIs "slice" .) (kindIs "string" .)) (empty .)) }}true{{ end }}
{{- end }}

{{/*
The workload an applied value reaches: (dict "to" "config.x" "entry" $entry) -> agent,
controller, or empty for both. A setting (config.x) reaches both, but for those one mode reads.
*/}}
{{- define "lifeboat.nth.reaches" -}}
{{- if hasPrefix "agent." .to }}agent
{{- else if hasPrefix "controller." .to }}controller
{{- else if and (hasPrefix "config." .to) (eq (toString .entry.mode) "imds") }}agent
{{- else if and (hasPrefix "config." .to) (eq (toString .entry.mode) "queue") }}controller
{{- end }}
{{- end }}

{{/*
The NTH keys a values file names ((dict "root" $ "s" $state): $state.present, the keys of NTH's
alone, empty or not) and sets ($state.given: key -> value, empty ones left out).
*/}}
{{- define "lifeboat.nth.given" -}}
{{- $s := .s }}
{{- range $key, $entry := $s.table }}
{{- $json := include "lifeboat.nth.lookup" (dict "values" $.root.Values "path" $key) }}
{{- if $json }}
{{- $v := get (fromJson $json) "v" }}
{{- if not $entry.same }}{{ $_ := set $s "present" (append $s.present $key) }}{{ end }}
{{- if not (include "lifeboat.nth.empty" $v) }}{{ $_ := set $s.given $key $v }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
NTH's values with no equivalent, each with what to use instead: (dict "root" $ "s" $state) ->
$state.refused. Read through lookups only, so that they are said whatever else is wrong.
*/}}
{{- define "lifeboat.nth.refusals" -}}
{{- $s := .s }}
{{- $root := .root }}
{{- $refused := list }}
{{- range $key := keys $s.given | sortAlpha }}
{{- $entry := get $s.table $key }}
{{- /* At NTH's default a refused key asks for what Lifeboat does anyway. */}}
{{- if and $entry.refuse (ne (toJson (get $s.given $key)) (toJson $entry.default)) }}
{{- $refused = append $refused (printf "%s: %s" $key $entry.refuse) }}
{{- end }}
{{- end }}
{{- $repo := "" }}
{{- with include "lifeboat.nth.lookup" (dict "values" $root.Values "path" "image.repository") }}{{ $repo = toString (fromJson .).v }}{{ end }}
{{- $tag := "" }}
{{- with include "lifeboat.nth.lookup" (dict "values" $root.Values "path" "image.tag") }}{{ $tag = toString (fromJson .).v }}{{ end }}
{{- $nthRepo := include "lifeboat.nth.repository" $root }}
{{- if and (ne $repo $nthRepo) (regexMatch "^v1\\.[0-9]+\\.[0-9]+" $tag) }}
{{- $refused = append $refused (printf "image.tag: %q is a release of NTH (v1.x.y); Lifeboat's releases are 0.x and its image tags have no leading v: leave image.tag out to run the image of this chart's version (%s), or name one of Lifeboat's tags" $tag $root.Chart.AppVersion) }}
{{- end }}
{{- if and (contains "aws-node-termination-handler" $repo) (ne $repo $nthRepo) }}
{{- $refused = append $refused (printf "image.repository: %q looks like NTH's image; name Lifeboat's image (default %s) or leave image.repository out" $repo (include "lifeboat.nth.defaultRepository" $root)) }}
{{- end }}
{{- if and (eq $repo $nthRepo) $tag }}
{{- $refused = append $refused (printf "image.tag: %q is a tag of NTH's image (image.repository is NTH's); leave both out to run Lifeboat's image of this chart's version, or name Lifeboat's image and tag" $tag) }}
{{- end }}
{{- with get $s.given "podDisruptionBudget" }}
{{- if ne (toJson .) (toJson (dict "maxUnavailable" 1)) }}
{{- $refused = append $refused (printf "podDisruptionBudget: %s: Lifeboat's controller has its own budget, maxUnavailable 1 (controller.podDisruptionBudget.enabled), so that the budget never blocks draining the node the controller runs on; remove podDisruptionBudget" (toJson .)) }}
{{- end }}
{{- end }}
{{- /* NTH's chart passes a deprecated key's variable and its replacement's (at its default)
alike, and NTH's binary then takes the replacement: the deprecated key alone had no effect,
which only matters when it asked for other than that default. */}}
{{- range $pair := list (list "checkASGTagBeforeDraining" "checkTagBeforeDraining") (list "managedAsgTag" "managedTag") }}
{{- $old := index $pair 0 }}
{{- $new := index $pair 1 }}
{{- $default := (get $s.table $new).default }}
{{- if and (hasKey $s.given $old) (not (hasKey $s.given $new)) (ne (toJson (get $s.given $old)) (toJson $default)) }}
{{- $refused = append $refused (printf "%s: %s had no effect in NTH: its chart passes %s (%s) as well, and NTH takes that one. Set %s: %s to have Lifeboat do what this asks, or remove %s to keep what NTH did" $old (toJson (get $s.given $old)) $new (toJson $default) $new (toJson (get $s.given $old)) $old) }}
{{- end }}
{{- end }}
{{- if and (or (hasKey $s.given "webhookTemplateConfigMapName") (hasKey $s.given "webhookTemplateConfigMapKey")) (not (and (hasKey $s.given "webhookTemplateConfigMapName") (hasKey $s.given "webhookTemplateConfigMapKey"))) }}
{{- $refused = append $refused "webhookTemplateConfigMapName and webhookTemplateConfigMapKey: set both (the ConfigMap and its key holding the template), or neither" }}
{{- end }}
{{- $_ := set $s "refused" $refused }}
{{- end }}

{{/*
NTH's values onto Lifeboat's, in .Values: (dict "root" $ "s" $state) -> $state.applied (each
(dict "key" "text" "reaches"), reaches as lifeboat.nth.reaches says) and $state.ignored.
*/}}
{{- define "lifeboat.nth.translate" -}}
{{- $s := .s }}
{{- $root := .root }}
{{- $given := $s.given }}
{{- $table := $s.table }}
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
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" $to "value" $v) }}
{{- $applied = append $applied (dict "key" $key "text" (printf "%s -> %s = %s" $key $to (toJson $v)) "reaches" (include "lifeboat.nth.reaches" (dict "to" $to "entry" $entry))) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Queue mode: the controller Deployment instead of the agent DaemonSet. */}}
{{- if hasKey $given "enableSqsTerminationDraining" }}
{{- $on := eq (toString (get $given "enableSqsTerminationDraining")) "true" }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "controller.enabled" "value" $on) }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "agent.enabled" "value" (not $on)) }}
{{- $applied = append $applied (dict "key" "enableSqsTerminationDraining" "text" (printf "enableSqsTerminationDraining -> controller.enabled = %v, agent.enabled = %v" $on (not $on)) "reaches" "") }}
{{- end }}

{{- /* Pod labels and annotations: both workloads; linux* only the DaemonSet (NTH merges them). */}}
{{- range $what := list "Labels" "Annotations" }}
{{- $plain := get $given (printf "pod%s" $what) | default dict }}
{{- $linux := get $given (printf "linuxPod%s" $what) | default dict }}
{{- if or $plain $linux }}
{{- $agent := mergeOverwrite (deepCopy (index $root.Values.agent (printf "pod%s" $what) | default dict)) $plain $linux }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "agent.pod%s" $what) "value" $agent) }}
{{- $applied = append $applied (dict "key" (printf "pod%s, linuxPod%s" $what $what) "text" (printf "pod%s, linuxPod%s -> agent.pod%s = %s" $what $what $what (toJson $agent)) "reaches" "agent") }}
{{- if $plain }}
{{- $controller := mergeOverwrite (deepCopy (index $root.Values.controller (printf "pod%s" $what) | default dict)) $plain }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "controller.pod%s" $what) "value" $controller) }}
{{- $applied = append $applied (dict "key" (printf "pod%s" $what) "text" (printf "pod%s -> controller.pod%s = %s" $what $what (toJson $controller)) "reaches" "controller") }}
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
{{- if ne (toJson $effective) (toJson (get $root.Values.agent $lower)) }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "agent.%s" $lower) "value" $effective) }}
{{- $applied = append $applied (dict "key" (printf "linux%s, %s, daemonset%s" $what $lower $what) "text" (printf "linux%s, %s, daemonset%s -> agent.%s = %s" $what $lower $what $lower (toJson $effective)) "reaches" "agent") }}
{{- end }}
{{- end }}
{{- with get $given $lower }}
{{- $v := . }}
{{- if eq $what "NodeSelector" }}{{ $v = merge (dict "kubernetes.io/os" "linux") . }}{{ end }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "controller.%s" $lower) "value" $v) }}
{{- $applied = append $applied (dict "key" $lower "text" (printf "%s -> controller.%s = %s" $lower $lower (toJson $v)) "reaches" "controller") }}
{{- end }}
{{- end }}

{{- /* NTH's liveness probe: its path and port are the probes server's settings; the rest are
the probe's timings. */}}
{{- with get $given "probes" }}
{{- $probe := deepCopy . }}
{{- with $probe.httpGet }}
{{- if .path }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "config.probesServerEndpoint" "value" .path) }}
{{- $applied = append $applied (dict "key" "probes" "text" (printf "probes.httpGet.path -> config.probesServerEndpoint = %s" (toJson .path)) "reaches" "") }}
{{- end }}
{{- if .port }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "config.probesServerPort" "value" .port) }}
{{- $applied = append $applied (dict "key" "probes" "text" (printf "probes.httpGet.port -> config.probesServerPort = %s" (toJson .port)) "reaches" "") }}
{{- end }}
{{- end }}
{{- $timings := omit $probe "httpGet" }}
{{- if $timings }}
{{- range $component := list "agent" "controller" }}
{{- $merged := mergeOverwrite (deepCopy (index $root.Values $component).livenessProbe) $timings }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "%s.livenessProbe" $component) "value" $merged) }}
{{- $applied = append $applied (dict "key" "probes" "text" (printf "probes -> %s.livenessProbe = %s" $component (toJson $merged)) "reaches" $component) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* The webhook: a URL from a Secret (NTH's key webhookurl), and templates written for NTH,
which then see NTH's kind names. */}}
{{- with get $given "webhookURLSecretName" }}
{{- $ref := dict "name" . "key" "webhookurl" }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "configFromSecret.webhookUrl" "value" $ref) }}
{{- $applied = append $applied (dict "key" "webhookURLSecretName" "text" (printf "webhookURLSecretName -> configFromSecret.webhookUrl = %s" (toJson $ref)) "reaches" "") }}
{{- end }}
{{- if hasKey $given "webhookTemplateConfigMapName" }}
{{- $ref := dict "name" (get $given "webhookTemplateConfigMapName") "key" (get $given "webhookTemplateConfigMapKey") }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "webhookTemplateConfigMap" "value" $ref) }}
{{- $applied = append $applied (dict "key" "webhookTemplateConfigMapName" "text" (printf "webhookTemplateConfigMapName, webhookTemplateConfigMapKey -> webhookTemplateConfigMap = %s" (toJson $ref)) "reaches" "") }}
{{- else if hasKey $given "webhookTemplate" }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "config.webhookTemplate" "value" (get $given "webhookTemplate")) }}
{{- $applied = append $applied (dict "key" "webhookTemplate" "text" "webhookTemplate -> config.webhookTemplate" "reaches" "") }}
{{- end }}
{{- if or (hasKey $given "webhookTemplate") (hasKey $given "webhookTemplateConfigMapName") }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "config.webhookNthKinds" "value" true) }}
{{- $applied = append $applied (dict "key" "webhookTemplate" "text" "webhookTemplate -> config.webhookNthKinds = true (the template sees NTH's .Kind and .Monitor values)" "reaches" "") }}
{{- end }}

{{- /* NTH's deprecated names lose to the current ones. */}}
{{- range $pair := list (list "checkTagBeforeDraining" "checkASGTagBeforeDraining") (list "managedTag" "managedAsgTag") }}
{{- $key := "" }}
{{- if hasKey $given (index $pair 0) }}{{ $key = index $pair 0 }}{{ else if hasKey $given (index $pair 1) }}{{ $key = index $pair 1 }}{{ end }}
{{- if $key }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "config.%s" (index $pair 0)) "value" (get $given $key)) }}
{{- $applied = append $applied (dict "key" $key "text" (printf "%s -> config.%s = %s" $key (index $pair 0) (toJson (get $given $key))) "reaches" "controller") }}
{{- end }}
{{- end }}

{{- if hasKey $given "podDisruptionBudget" }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "controller.podDisruptionBudget.enabled" "value" true) }}
{{- $applied = append $applied (dict "key" "podDisruptionBudget" "text" "podDisruptionBudget -> controller.podDisruptionBudget.enabled = true (maxUnavailable 1)" "reaches" "controller") }}
{{- end }}

{{- /* The DaemonSet's DNS policy: dnsPolicy if set, else linuxDnsPolicy. */}}
{{- if or (hasKey $given "dnsPolicy") (hasKey $given "linuxDnsPolicy") }}
{{- $policy := get $given "dnsPolicy" | default (get $given "linuxDnsPolicy") }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" "agent.dnsPolicy" "value" $policy) }}
{{- $applied = append $applied (dict "key" "dnsPolicy, linuxDnsPolicy" "text" (printf "dnsPolicy, linuxDnsPolicy -> agent.dnsPolicy = %s" (toJson $policy)) "reaches" "agent") }}
{{- end }}

{{- /* NTH's own image is never what a Lifeboat release should run. */}}
{{- $repo := toString $root.Values.image.repository }}
{{- if eq $repo (include "lifeboat.nth.repository" $root) }}
{{- $_ := set $root.Values.image "repository" (include "lifeboat.nth.defaultRepository" $root) }}
{{- $applied = append $applied (dict "key" "image.repository" "text" (printf "image.repository %s (NTH's image) -> %s" $repo (include "lifeboat.nth.defaultRepository" $root)) "reaches" "") }}
{{- end }}

{{- /* NTH's identity: the workload that needs AWS credentials in this mode (the controller
in queue mode, else the agent, which completes lifecycle actions) runs as the ServiceAccount NTH's
chart would name for this release and these values, so that an IAM role's trust policy (IRSA) or
a Pod Identity association made for NTH still matches. The other workload keeps its own name. */}}
{{- if $s.present }}
{{- $credential := ternary "controller" "agent" (eq (toString $root.Values.controller.enabled) "true") }}
{{- $other := ternary "agent" "controller" (eq $credential "controller") }}
{{- $sa := (index $root.Values $credential).serviceAccount }}
{{- if hasKey $given "serviceAccount.name" }}
{{- $name := get $given "serviceAccount.name" }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "%s.serviceAccount.name" $credential) "value" $name) }}
{{- $applied = append $applied (dict "key" "serviceAccount.name" "text" (printf "serviceAccount.name -> %s.serviceAccount.name = %s" $credential (toJson $name)) "reaches" $credential) }}
{{- if not (index $root.Values $other).serviceAccount.create }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "%s.serviceAccount.name" $other) "value" $name) }}
{{- $applied = append $applied (dict "key" "serviceAccount.name" "text" (printf "serviceAccount.name -> %s.serviceAccount.name = %s (serviceAccount.create is false: an existing account)" $other (toJson $name)) "reaches" $other) }}
{{- end }}
{{- else if and $sa.create (not $sa.name) }}
{{- $name := include "lifeboat.nth.serviceAccountName" $root }}
{{- include "lifeboat.nth.put" (dict "values" $root.Values "path" (printf "%s.serviceAccount.name" $credential) "value" $name) }}
{{- $applied = append $applied (dict "key" "(NTH's ServiceAccount)" "text" (printf "(NTH's ServiceAccount) -> %s.serviceAccount.name = %s, the name NTH's chart gives this release" $credential (toJson $name)) "reaches" $credential) }}
{{- end }}
{{- end }}
{{- $_ := set $s "applied" $applied }}
{{- $_ := set $s "ignored" $ignored }}
{{- end }}

{{/*
No silent loss of protection: a drain source NTH's values turn on (given, or left at NTH's
default) that the agent would leave off is refused, naming the key and the values that settle
it either way. (dict "root" $ "s" $state) -> $state.lost.
*/}}
{{- define "lifeboat.nth.lost" -}}
{{- $s := .s }}
{{- $root := .root }}
{{- $lost := list }}
{{- if and $s.present $root.Values.agent.enabled (not (eq (toString (get $s.given "enableSqsTerminationDraining")) "true")) }}
{{- $cfg := include "lifeboat.effectiveConfig" (dict "root" $root "component" "agent") | fromYaml }}
{{- range $key, $what := include "lifeboat.nth.drainSources" $root | fromYaml }}
{{- $entry := get $s.table $key }}
{{- $setting := trimPrefix "config." (first $entry.to) }}
{{- $nthOn := eq (toString $entry.default) "true" }}
{{- $json := include "lifeboat.nth.lookup" (dict "values" $root.Values "path" $key) }}
{{- if $json }}{{ $nthOn = eq (toString (get (fromJson $json) "v")) "true" }}{{ end }}
{{- if and $nthOn (not (include "lifeboat.on" (dict "config" $cfg "key" $setting))) }}
{{- if $json }}
{{- $lost = append $lost (printf "%s: true asks the agent to drain on %s, and config.%s or agent.config.%s turns it off: remove the override, or set %s: false" $key $what $setting $setting $key) }}
{{- else }}
{{- $lost = append $lost (printf "%s: left out, NTH drains on %s (its default is true) and Lifeboat's agent would not (its default is false): set %s: true to keep draining on it, or %s: false to accept Lifeboat's default" $key $what $key $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set $s "lost" $lost }}
{{- end }}

{{/*
The applied values split by whether they reach a workload this release runs: (dict "root" $
"s" $state) -> $state.applied (texts), $state.unused (the keys that reach none), $state.mode
(how NOTES name the mode those are not used in).
*/}}
{{- define "lifeboat.nth.split" -}}
{{- $s := .s }}
{{- $values := .root.Values }}
{{- $applied := list }}
{{- $used := list }}
{{- range $s.applied }}
{{- if or (not .reaches) (index $values .reaches).enabled }}
{{- $applied = append $applied .text }}
{{- $used = append $used .key }}
{{- end }}
{{- end }}
{{- $unused := list }}
{{- range $s.applied }}
{{- if not (or (has .key $used) (has .key $unused)) }}{{ $unused = append $unused .key }}{{ end }}
{{- end }}
{{- $mode := "" }}
{{- if and $values.controller.enabled (not $values.agent.enabled) }}{{ $mode = "queue mode (no agent)" }}
{{- else if and $values.agent.enabled (not $values.controller.enabled) }}{{ $mode = "IMDS mode (no controller)" }}
{{- else }}{{ $mode = "this release (nothing is enabled)" }}{{ end }}
{{- $_ := set $s "applied" $applied }}
{{- $_ := set $s "unused" (sortAlpha $unused) }}
{{- $_ := set $s "mode" $mode }}
{{- end }}

{{- define "lifeboat.nth.apply" -}}
{{- if not (hasKey $ "lifeboatNTH") }}
{{- $s := dict "table" (.Files.Get "nth/keys.yaml" | fromYaml) "given" (dict) "present" (list) "refused" (list) "applied" (list) "ignored" (list) "lost" (list) "unused" (list) }}
{{- $check := dict "unknown" (list) "invalid" (list) "problems" (list) "skipped" (list) }}
{{- $_ := include "lifeboat.check.schema" (dict "schema" (.Files.Get "schema/values.json" | fromJson) "value" .Values "path" "" "acc" $check) }}
{{- $_ := include "lifeboat.nth.given" (dict "root" $ "s" $s) }}
{{- $_ := include "lifeboat.nth.refusals" (dict "root" $ "s" $s) }}
{{- /* The other checks read the values as the schema types them. */}}
{{- if not $check.invalid }}
{{- if kindIs "invalid" .Values.nthLabels }}{{ $_ := set .Values "nthLabels" (not (empty $s.present)) }}{{ end }}
{{- $_ := include "lifeboat.nth.translate" (dict "root" $ "s" $s) }}
{{- $_ := include "lifeboat.nth.lost" (dict "root" $ "s" $s) }}
{{- $_ := include "lifeboat.check.values" (dict "root" $ "acc" $check) }}
{{- $_ := include "lifeboat.nth.split" (dict "root" $ "s" $s) }}
{{- end }}
{{- $_ := include "lifeboat.refuse" (dict "check" $check "s" $s) }}
{{- $_ := set $ "lifeboatNTH" (dict "applied" $s.applied "ignored" $s.ignored "unused" $s.unused "mode" $s.mode "present" $s.present "given" (keys $s.given) "skipped" $check.skipped) }}
{{- end }}
{{- end }}
