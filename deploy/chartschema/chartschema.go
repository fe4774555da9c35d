// SPDX-License-Identifier: Apache-2.0

// Package chartschema writes the chart's schema from its values.yaml and the NTH keys it takes
// (nth/keys.yaml): every object the chart defines refuses keys it does not know, so a typo
// fails the install naming the key, while NTH's keys pass on to the templates, which map or
// refuse each with a message of its own.
//
// The chart's templates check values against that schema (schema/values.json), so that a
// misspelt key is refused in the same message as every other refusal of the render; helm
// checks the schema before any template runs, so values.schema.json only describes the values
// (for editors and helm show values) and refuses nothing but a global that is not an object.
package chartschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// freeForm are the objects whose keys are the user's (Kubernetes fields, labels), though
// values.yaml gives them keys. Empty objects in values.yaml are free-form too, except those
// keyed like config.
var freeForm = map[string]bool{
	"podSecurityContext": true, "securityContext": true, "dashboard.labels": true,
	"agent.nodeSelector": true, "agent.affinity": true, "agent.resources": true,
	"agent.livenessProbe": true, "agent.readinessProbe": true,
	"controller.nodeSelector": true, "controller.resources": true,
	"controller.livenessProbe": true, "controller.readinessProbe": true,
}

// keyedLikeConfig are the objects whose keys are Lifeboat's settings.
var keyedLikeConfig = map[string]bool{"agent.config": true, "controller.config": true, "configFromSecret": true}

// setByTheChart are settings the chart sets itself; the schema lets them through so that the
// templates refuse them with the reason.
var setByTheChart = []string{"nodeName", "podName", "namespace", "enableSqsTerminationDraining"}

// retired are keys of earlier releases that values.yaml no longer holds, with their schema: a
// values file written for an earlier release still installs, and the templates say what
// became of them where that matters.
var retired = map[string]map[string]any{
	"agent.nodeRestriction.required": {
		"type":        "boolean",
		"description": "Deprecated, no effect: the node restriction is part of every render; set agent.nodeRestriction.enabled=false to install without it.",
	},
}

// Generate returns the schema for a chart with these values.yaml and nth/keys.yaml, which the
// templates check: schema/values.json.
func Generate(valuesYAML, nthKeysYAML []byte) ([]byte, error) {
	root, err := generate(valuesYAML, nthKeysYAML)
	if err != nil {
		return nil, err
	}
	return encode(root)
}

// Describe returns values.schema.json, which helm checks before the templates run: the
// schema's properties without what it refuses (types, unknown keys, required keys), and
// global, which helm passes to a chart that is another's dependency, as an object.
func Describe(valuesYAML, nthKeysYAML []byte) ([]byte, error) {
	root, err := generate(valuesYAML, nthKeysYAML)
	if err != nil {
		return nil, err
	}
	described := describe(root)
	described["$schema"] = root["$schema"]
	described["title"] = "Lifeboat chart values (the chart's templates check them against schema/values.json)"
	described["properties"].(map[string]any)["global"] = map[string]any{"type": "object"}
	return encode(described)
}

// describe keeps a schema's properties, recursively, and nothing it refuses.
func describe(schema map[string]any) map[string]any {
	out := map[string]any{}
	if props, ok := schema["properties"].(map[string]any); ok {
		described := map[string]any{}
		for k, v := range props {
			sub, _ := v.(map[string]any)
			described[k] = describe(sub)
		}
		out["properties"] = described
	}
	return out
}

func encode(root map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func generate(valuesYAML, nthKeysYAML []byte) (map[string]any, error) {
	var values map[string]any
	if err := yaml.Unmarshal(valuesYAML, &values); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	var nth map[string]map[string]any
	if err := yaml.Unmarshal(nthKeysYAML, &nth); err != nil {
		return nil, fmt.Errorf("nth/keys.yaml: %w", err)
	}
	config, _ := values["config"].(map[string]any)
	if config == nil {
		return nil, fmt.Errorf("values.yaml has no config")
	}
	root := objectSchema("", values, config)
	for _, path := range []string{"config", "agent.config", "controller.config"} {
		for _, k := range setByTheChart {
			admit(root, append(strings.Split(path, "."), k))
		}
	}
	for key, schema := range retired {
		parts := strings.Split(key, ".")
		props, _ := root["properties"].(map[string]any)
		for _, p := range parts[:len(parts)-1] {
			parent, _ := props[p].(map[string]any)
			if props, _ = parent["properties"].(map[string]any); props == nil {
				return nil, fmt.Errorf("retired key %s: values.yaml has no object %s", key, p)
			}
		}
		leaf := parts[len(parts)-1]
		if _, ok := props[leaf]; ok {
			return nil, fmt.Errorf("retired key %s is in values.yaml", key)
		}
		props[leaf] = schema
	}
	root["$schema"] = "http://json-schema.org/draft-07/schema#"
	root["title"] = "Lifeboat chart values (and aws-node-termination-handler's, which the chart maps or refuses)"

	keys := make([]string, 0, len(nth))
	for k := range nth {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		admit(root, strings.Split(key, "."))
	}
	// A chart that is another's dependency gets the parent's global values.
	root["properties"].(map[string]any)["global"] = map[string]any{"type": "object"}
	return root, nil
}

func objectSchema(path string, m map[string]any, config map[string]any) map[string]any {
	switch {
	case keyedLikeConfig[path]:
		props := map[string]any{}
		for k := range config {
			if path == "configFromSecret" {
				props[k] = map[string]any{
					"type":                 "object",
					"additionalProperties": false,
					"required":             []string{"name", "key"},
					"properties":           map[string]any{"name": map[string]any{"type": "string"}, "key": map[string]any{"type": "string"}},
				}
			} else {
				props[k] = scalar()
			}
		}
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	case freeForm[path] || len(m) == 0:
		return map[string]any{"type": "object"}
	}
	props := map[string]any{}
	for k, v := range m {
		props[k] = valueSchema(join(path, k), v, config)
	}
	return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
}

func valueSchema(path string, v any, config map[string]any) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		return objectSchema(path, v, config)
	case []any:
		return map[string]any{"type": "array"}
	case bool:
		if strings.HasPrefix(path, "config.") {
			return scalar()
		}
		return map[string]any{"type": "boolean"}
	}
	if strings.HasPrefix(path, "config.") {
		return scalar()
	}
	return map[string]any{}
}

// scalar is a setting's value: the binary parses it, so any string, number or boolean.
func scalar() map[string]any {
	return map[string]any{"type": []string{"string", "number", "boolean", "null"}}
}

// admit lets an NTH key through: its leaf takes any value (the templates check it), and an
// object only NTH has refuses the keys NTH's does not have.
func admit(schema map[string]any, parts []string) {
	if schema["type"] != "object" || schema["properties"] == nil {
		if schema["type"] == "object" && schema["additionalProperties"] == nil {
			return // free-form: anything goes already
		}
		schema["type"] = "object"
		schema["additionalProperties"] = false
		schema["properties"] = map[string]any{}
	}
	props := schema["properties"].(map[string]any)
	child, ok := props[parts[0]].(map[string]any)
	if len(parts) == 1 {
		if !ok {
			props[parts[0]] = map[string]any{}
		}
		return
	}
	if !ok {
		child = map[string]any{}
		props[parts[0]] = child
	}
	admit(child, parts[1:])
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
