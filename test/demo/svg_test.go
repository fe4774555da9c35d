// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The timeline is well-formed SVG with one mark per step: a notice per lane, a cordon,
// drained mark and eviction per pod on each node, one lifecycle completion, one refusal; and
// node B's hand-back: its waits, its target draining and gone, its volume detached.
func TestTimeline(t *testing.T) {
	r := handled()
	r.Foreign.Reason = `refused <because> "quoted" & more`
	path := filepath.Join(t.TempDir(), "timeline.svg")
	if err := writeTimeline(path, r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	titles := map[string]int{}
	var inTitle bool
	dec := xml.NewDecoder(f)
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inTitle = tok.Name.Local == "title"
		case xml.CharData:
			if inTitle {
				words := strings.Fields(string(tok))
				if len(words) > 1 && strings.HasPrefix(words[1], "evicted") {
					titles["evicted"]++
				} else if len(words) > 0 {
					titles[words[0]]++
				}
			}
		case xml.EndElement:
			inTitle = false
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	want := map[string]int{"notice": 3, "cordoned": 2, "draining:": 2, "evicted": 7, "drained": 2, "lifecycle": 1, "refused": 1,
		"hand-back": 1, "target": 1, "gone": 1, "volume": 1, "app": 1}
	for k, n := range want {
		if titles[k] != n {
			t.Errorf("%d marks titled %q, want %d (all: %v)", titles[k], k, n, titles)
		}
	}
}

func TestTimelineWithMissingSteps(t *testing.T) {
	r := handled()
	r.Cases[0].Cordoned, r.Cases[0].Drained, r.Cases[0].Evicted = -1, -1, nil
	r.Foreign.Refused = -1
	path := filepath.Join(t.TempDir(), "timeline.svg")
	if err := writeTimeline(path, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil {
		t.Errorf("not well-formed: %v", err)
	}
	if strings.Contains(string(b), "<title>refused") {
		t.Error("a refusal mark for a notice that was never refused")
	}
	if strings.Count(string(b), "<title>cordoned") != 1 {
		t.Error("want a cordon mark for node B only")
	}
}

// A hand-back cut short is drawn with what was seen: a target still draining reaches the
// picture's end, and no mark stands for a detachment or a completion that never came.
func TestTimelineWithDetachUnfinished(t *testing.T) {
	r := handled()
	b := &r.Cases[1]
	b.Completed, b.Completions = -1, 0
	b.Detach.TargetGone, b.Detach.Detached = -1, -1
	path := filepath.Join(t.TempDir(), "timeline.svg")
	if err := writeTimeline(path, r); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(out)
	if err := xml.Unmarshal(out, new(struct{})); err != nil {
		t.Errorf("not well-formed: %v", err)
	}
	if !strings.Contains(svg, "draining until the end (still draining)") {
		t.Error("the target's draining is not drawn to the end")
	}
	for _, absent := range []string{"<title>gone from", "<title>volume", "<title>hand-back", "<title>lifecycle"} {
		if strings.Contains(svg, absent) {
			t.Errorf("a %q mark for something that never happened", absent)
		}
	}
}
