{{/*
Pod template of one component: (dict "root" $ "component" "agent" "controllerMode" "false").
*/}}
{{- define "lifeboat.podTemplate" -}}
{{- $root := .root }}
{{- $values := index $root.Values .component -}}
metadata:
  labels:
    {{- include "lifeboat.selectorLabels" . | nindent 4 }}
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
  dnsPolicy: ClusterFirstWithHostNet
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
      {{- with $values.extraVolumeMounts }}
      volumeMounts:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  {{- with $values.extraVolumes }}
  volumes:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.tolerations }}
  tolerations:
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
