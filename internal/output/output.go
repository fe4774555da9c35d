// SPDX-License-Identifier: Apache-2.0

// Package output writes what the read-only commands report in kubectl's output formats: a
// table (and its wide form), each item's name, JSON, YAML, or a JSONPath template. JSON and
// YAML carry apiVersion and kind, so that scripts can tell what they read, and numbers as
// numbers.
package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// APIVersion names the schema of every object the commands print.
const APIVersion = "lifeboat.dev/v1alpha1"

// Format names.
const (
	Table    = "table"
	Wide     = "wide"
	Name     = "name"
	JSON     = "json"
	YAML     = "yaml"
	JSONPath = "jsonpath"
)

// Format is a parsed -o value.
type Format struct {
	Name     string
	Template string // the JSONPath template, for JSONPath
}

// Parse reads an -o value ("" is table) among the formats a command offers; "jsonpath=TEMPLATE"
// when it offers JSONPath.
func Parse(value string, offered ...string) (Format, error) {
	name, template, hasTemplate := strings.Cut(value, "=")
	if value == "" {
		name = Table
	}
	if !slices.Contains(offered, name) {
		return Format{}, fmt.Errorf("unknown output format %q: use one of %s", value, strings.Join(offered, ", "))
	}
	if name == JSONPath {
		if !hasTemplate || template == "" {
			return Format{}, fmt.Errorf("-o jsonpath needs a template, for example -o jsonpath='{.items[*].name}'")
		}
		if err := jsonpath.New("output").Parse(template); err != nil {
			return Format{}, fmt.Errorf("-o jsonpath=%s: %w", template, err)
		}
	} else if hasTemplate {
		return Format{}, fmt.Errorf("-o %s takes no template", name)
	}
	return Format{Name: name, Template: template}, nil
}

// Structured reports whether the format is one Write handles (JSON, YAML, JSONPath); the
// others are the command's own.
func (f Format) Structured() bool {
	return f.Name == JSON || f.Name == YAML || f.Name == JSONPath
}

// Write writes obj as JSON, YAML or through the JSONPath template.
func Write(w io.Writer, obj any, f Format) error {
	b, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return err
	}
	switch f.Name {
	case JSON:
		_, err = w.Write(append(b, '\n'))
		return err
	case YAML:
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	case JSONPath:
		// The template sees the JSON form, field names included, as kubectl's does.
		var data any
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&data); err != nil {
			return err
		}
		p := jsonpath.New("output").AllowMissingKeys(true)
		if err := p.Parse(f.Template); err != nil {
			return err
		}
		if err := p.Execute(w, data); err != nil {
			return err
		}
		_, err = io.WriteString(w, "\n")
		return err
	}
	return fmt.Errorf("output format %q is not a structured one", f.Name)
}
