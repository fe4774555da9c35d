// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
)

// logLine is one JSON log line of a lifeboat process (JSON_LOGGING=true).
type logLine map[string]any

func (l logLine) str(key string) string {
	s, _ := l[key].(string)
	return s
}

func (l logLine) num(key string) float64 {
	f, _ := l[key].(float64)
	return f
}

// logTail reads a growing log file line by line, remembering where it stopped.
type logTail struct {
	path    string
	offset  int64
	partial []byte
}

// next returns the complete lines written since the last call. Lines that are not JSON
// (a panic, say) are skipped: the file keeps them for a person to read.
func (t *logTail) next() []logLine {
	f, err := os.Open(t.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	t.offset += int64(len(b))
	b = append(t.partial, b...)
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		t.partial = b
		return nil
	}
	t.partial = append([]byte(nil), b[end+1:]...)
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(b[:end+1]))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}
