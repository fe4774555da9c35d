{{/*
Pod template of one component: (dict "root" $ "component" "agent" "controllerMode" "false").
*/}}
{{- define "lifeboat.podTemplate" -}}
{{- $root := .root }}
{{- $values := index $root.Values .component -}}
metadata:
  labels:
    {{- include "lifeboat.podLabels" . | nindent 4 }}
    {{- with $values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "lifeboat.serviceAccountName" . }}
  {{- with $values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- if $values.hostNetwork }}
  hostNetwork: true
  # Cluster DNS still answers first although the pod uses the host's network.
  dnsPolicy: {{ $values.dnsPolicy | default "ClusterFirstWithHostNet" }}
  {{- else if $values.dnsPolicy }}
  dnsPolicy: {{ $values.dnsPolicy }}
  {{- end }}
  {{- with $values.dnsConfig }}
  dnsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationGracePeriodSeconds: {{ $values.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: lifeboat
      image: {{ include "lifeboat.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args: [{{ .component | quote }}]
      env:
        {{- include "lifeboat.env" . | nindent 8 }}
      {{- with include "lifeboat.portsAndProbes" . | trim }}
      {{- . | nindent 6 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      {{- with $values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- $template := $root.Values.webhookTemplateConfigMap }}
      {{- if or $values.extraVolumeMounts $template.name }}
      volumeMounts:
        {{- if $template.name }}
        - name: webhook-template
          mountPath: {{ include "lifeboat.webhookTemplateDir" . }}
          readOnly: true
        {{- end }}
        {{- with $values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
  {{- if or $values.extraVolumes $template.name }}
  volumes:
    {{- if $template.name }}
    - name: webhook-template
      configMap:
        name: {{ $template.name }}
        items:
          - key: {{ $template.key }}
            path: {{ $template.key }}
    {{- end }}
    {{- with $values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  {{- with $values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $values.affinity }}
  affinity:
    {{- toYaml $values.affinity | nindent 4 }}
  {{- else if eq .component "controller" }}
  # Spread replicas when there are nodes to spread over; preferred, so that a single
  # eligible node still takes every replica.
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "lifeboat.selectorLabels" . | nindent 16 }}
  {{- end }}
{{- end }}
