{{/* Chart name, cut to the 63 characters a label value allows. */}}
{{- define "lifeboat.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Resource name prefix: the release name, plus the chart name unless the release has it. */}}
{{- define "lifeboat.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of one component's resources: (dict "root" $ "component" "agent"). */}}
{{- define "lifeboat.componentName" -}}
{{- printf "%s-%s" (include "lifeboat.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lifeboat.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "lifeboat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels of one component: (dict "root" $ "component" "agent"). With nthLabels, NTH's
chart's (its name, nameOverride included; its components daemonset and deployment; the
DaemonSet's kubernetes.io/os), so that selectors copied from NTH's values still match.
*/}}
{{- define "lifeboat.selectorLabels" -}}
{{- if .root.Values.nthLabels -}}
app.kubernetes.io/name: {{ default "aws-node-termination-handler" .root.Values.nameOverride | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ ternary "daemonset" "deployment" (eq .component "agent") }}
{{- if eq .component "agent" }}
kubernetes.io/os: linux
{{- end }}
{{- else -}}
app.kubernetes.io/name: {{ include "lifeboat.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end }}

{{/* A component's pod labels beside its selector's: NTH's k8s-app with nthLabels. */}}
{{- define "lifeboat.podLabels" -}}
{{ include "lifeboat.selectorLabels" . }}
{{- if .root.Values.nthLabels }}
k8s-app: aws-node-termination-handler
{{- end }}
{{- end }}

{{/* Labels of one component's objects: the chart's, with the component's selector labels. */}}
{{- define "lifeboat.componentLabels" -}}
{{- $selector := include "lifeboat.selectorLabels" . | fromYaml -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ get $selector "app.kubernetes.io/name" }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
app.kubernetes.io/component: {{ get $selector "app.kubernetes.io/component" }}
{{- with get $selector "kubernetes.io/os" }}
kubernetes.io/os: {{ . }}
{{- end }}
{{- end }}

{{/* ServiceAccount of one component: (dict "root" $ "component" "agent"). */}}
{{- define "lifeboat.serviceAccountName" -}}
{{- $sa := (index .root.Values .component).serviceAccount }}
{{- /* Without create, lifeboat.check.values requires a name. */}}
{{- default (include "lifeboat.componentName" .) $sa.name }}
{{- end }}

{{- define "lifeboat.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The effective settings of one component: config, then <component>.config key by key. A plain
loop rather than sprig's merge, which would let a false or 0 override lose to the default.
(lifeboat.check.values refuses a template file named both here and by the ConfigMap.)
*/}}
{{- define "lifeboat.effectiveConfig" -}}
{{- $cfg := dict }}
{{- range $k, $v := .root.Values.config }}{{ $_ := set $cfg $k $v }}{{ end }}
{{- range $k, $v := (index .root.Values .component).config }}{{ $_ := set $cfg $k $v }}{{ end }}
{{- with .root.Values.webhookTemplateConfigMap.name }}
{{- $_ := set $cfg "webhookTemplateFile" (printf "%s/%s" (include "lifeboat.webhookTemplateDir" $) $.root.Values.webhookTemplateConfigMap.key) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The controller's replicas: as written, else 2 (a warm standby), 1 with hostNetwork. */}}
{{- define "lifeboat.controllerReplicas" -}}
{{- $r := .Values.controller.replicas }}
{{- if kindIs "invalid" $r }}{{ ternary 1 2 .Values.controller.hostNetwork }}{{ else }}{{ $r }}{{ end }}
{{- end }}

{{/* The controller's Lease: config.leaderElectionLeaseName, else the controller's name. */}}
{{- define "lifeboat.leaseName" -}}
{{- $ctx := dict "root" .root "component" "controller" }}
{{- (include "lifeboat.effectiveConfig" $ctx | fromYaml).leaderElectionLeaseName | default (include "lifeboat.componentName" $ctx) }}
{{- end }}

{{/* Where the webhook template's ConfigMap is mounted. */}}
{{- define "lifeboat.webhookTemplateDir" -}}/etc/lifeboat/webhook-template{{- end }}

{{/*
A setting's value as the binary reads it. YAML numbers arrive as float64, which would print
172800 as 1.728e+05.
*/}}
{{- define "lifeboat.settingValue" -}}
{{- if kindIs "float64" . }}
{{- if eq (floor .) . }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if kindIs "invalid" . }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}

{{/*
Whether a boolean setting is on in an effective config: (dict "config" $cfg "key" "x"). The
spellings of true that the binary accepts (Go's strconv.ParseBool).
*/}}
{{- define "lifeboat.on" -}}
{{- if has (include "lifeboat.settingValue" (get .config .key) | trim) (list "1" "t" "T" "true" "TRUE" "True") }}true{{ end }}
{{- end }}

{{/*
Environment of one component: (dict "root" $ "component" "agent" "controllerMode" "false"): the
chart's variables, then <component>.extraEnv. A name in extraEnv replaces the chart's variable of
that name (a pod whose env names a variable twice is refused by server-side apply, and the
last would win elsewhere); lifeboat.check.values refuses extraEnv naming one variable twice.
*/}}
{{- define "lifeboat.env" -}}
{{- $extra := (index .root.Values .component).extraEnv | default list }}
{{- $names := list }}
{{- range $extra }}{{ $names = append $names .name }}{{ end }}
{{- $env := list }}
{{- range (include "lifeboat.chartEnv" . | fromYamlArray) }}
{{- if not (has .name $names) }}{{ $env = append $env . }}{{ end }}
{{- end }}
{{- $env = concat $env $extra }}
{{- toYaml $env }}
{{- end }}

{{/* The chart's own variables of one component (without extraEnv). */}}
{{- define "lifeboat.chartEnv" -}}
{{- $root := .root }}
{{- $table := include "lifeboat.settingTable" . | fromYaml }}
{{- $cfg := include "lifeboat.effectiveConfig" . | fromYaml }}
{{- $fromSecret := $root.Values.configFromSecret | default dict -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: ENABLE_SQS_TERMINATION_DRAINING
  value: {{ .controllerMode | quote }}
{{- if and (eq .component "controller") (not (get $cfg "leaderElectionLeaseName")) (not (hasKey $fromSecret "leaderElectionLeaseName")) }}
- name: LEADER_ELECTION_LEASE_NAME
  value: {{ include "lifeboat.leaseName" . | quote }}
{{- end }}
{{- /* The schema holds config's keys to Lifeboat's settings and their values to scalars;
lifeboat.check.values refuses the settings the chart sets itself. */}}
{{- range $key, $value := $cfg }}
{{- $env := get $table $key }}
{{- $s := include "lifeboat.settingValue" $value }}
{{- if and (ne $s "") (not (hasKey $fromSecret $key)) }}
- name: {{ $env }}
  value: {{ $s | toJson }}
{{- end }}
{{- end }}
{{- /* On the host network an empty bind address would serve on every address of the node.
The metrics server binds to the node's IP instead, which is the pod's IP there, so a scrape
of the pod still reaches it; the probes server binds to the loopback address, which only the
node itself reaches: its probes name that host (lifeboat.probesHost), and no neighbour can
hold its connection places. An address the user gives (config, a Secret, extraEnv) wins. */}}
{{- if (index $root.Values .component).hostNetwork }}
{{- range $key, $default := dict "prometheusServerBindAddress" "status.hostIP" "probesServerBindAddress" "127.0.0.1" }}
{{- if not (include "lifeboat.serverAddress" (dict "root" $root "component" $.component "key" $key) | fromYaml).given }}
- name: {{ get $table $key }}
{{- if eq $default "status.hostIP" }}
  valueFrom:
    fieldRef:
      fieldPath: status.hostIP
{{- else }}
  value: {{ $default | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key, $ref := $fromSecret }}
- name: {{ get $table $key }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end }}
{{- end }}

{{/*
The bind address a user gives one component's server: (dict "root" $ "component" "agent" "key"
"probesServerBindAddress"). YAML: given (in config, a Secret or extraEnv), known (the chart
can read it: not from a Secret or an extraEnv valueFrom) and value. The pod's environment is
config, then the Secret's, then extraEnv, and the last of a name wins.
*/}}
{{- define "lifeboat.serverAddress" -}}
{{- $cfg := include "lifeboat.effectiveConfig" . | fromYaml }}
{{- $env := get (include "lifeboat.settingTable" . | fromYaml) .key }}
{{- $value := include "lifeboat.settingValue" (get $cfg .key) | trim }}
{{- $given := ne $value "" }}
{{- $known := true }}
{{- if hasKey (.root.Values.configFromSecret | default dict) .key }}
{{- $given = true }}{{ $known = false }}
{{- end }}
{{- range (index .root.Values .component).extraEnv }}
{{- if eq .name $env }}
{{- $given = true }}
{{- $known = and (not .valueFrom) (hasKey . "value") }}
{{- $value = toString (.value | default "") | trim }}
{{- end }}
{{- end }}
{{- toYaml (dict "given" $given "known" $known "value" $value) }}
{{- end }}

{{/*
The host a component's probes name: the probes server's address on the host network, where
the kubelet (in the host's network namespace) reaches it, the loopback address included.
Empty, so the kubelet probes the pod's IP: on the pod network (where 127.0.0.1 would be the
node's, not the pod's), for an address that means every interface (0.0.0.0, ::), and for one
the chart cannot read.
*/}}
{{- define "lifeboat.probesHost" -}}
{{- if (index .root.Values .component).hostNetwork }}
{{- $a := include "lifeboat.serverAddress" (dict "root" .root "component" .component "key" "probesServerBindAddress") | fromYaml }}
{{- if not $a.given }}127.0.0.1
{{- else if and $a.known (not (regexMatch "^(?i)(::ffff:)?[0:.]+$" $a.value)) }}{{ $a.value }}
{{- end }}
{{- end }}
{{- end }}

{{/* Container ports and probes of one component, from its effective config. */}}
{{- define "lifeboat.portsAndProbes" -}}
{{- $values := index .root.Values .component }}
{{- $cfg := include "lifeboat.effectiveConfig" . | fromYaml }}
{{- $metrics := include "lifeboat.on" (dict "config" $cfg "key" "enablePrometheusServer") }}
{{- $probes := include "lifeboat.on" (dict "config" $cfg "key" "enableProbesServer") }}
{{- if or $metrics $probes }}
{{- /* With hostNetwork the API server sets hostPort = containerPort; never set it otherwise. */}}
ports:
{{- if $metrics }}
  - name: metrics
    containerPort: {{ include "lifeboat.settingValue" $cfg.prometheusServerPort }}
    protocol: TCP
{{- end }}
{{- if $probes }}
  - name: probes
    containerPort: {{ include "lifeboat.settingValue" $cfg.probesServerPort }}
    protocol: TCP
{{- end }}
{{- end }}
{{- if $probes }}
{{- $host := include "lifeboat.probesHost" . }}
livenessProbe:
  httpGet:
    {{- with $host }}
    host: {{ . | quote }}
    {{- end }}
    path: {{ include "lifeboat.settingValue" $cfg.probesServerEndpoint }}
    port: probes
  {{- toYaml $values.livenessProbe | nindent 2 }}
readinessProbe:
  httpGet:
    {{- with $host }}
    host: {{ . | quote }}
    {{- end }}
    path: /readyz
    port: probes
  {{- toYaml $values.readinessProbe | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Whether the controller runs the periodic readiness check (READINESS_REPORT_INTERVAL set and
not 0): the reader ClusterRole is then rendered and bound to the controller.
*/}}
{{- define "lifeboat.readinessReport" -}}
{{- if .Values.controller.enabled }}
{{- $cfg := include "lifeboat.effectiveConfig" (dict "root" . "component" "controller") | fromYaml }}
{{- $every := include "lifeboat.settingValue" (get $cfg "readinessReportInterval") | trim }}
{{- if not (has $every (list "" "0" "0s")) }}true{{ end }}
{{- end }}
{{- end }}
