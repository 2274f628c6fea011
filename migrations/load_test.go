package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadRejectsBadFileSets(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name    string
		fs      fstest.MapFS
		wantErr string
	}{
		{"gap", fstest.MapFS{"0001_a.up.sql": file("x"), "0001_a.down.sql": file("x"), "0003_c.up.sql": file("x"), "0003_c.down.sql": file("x")}, "version 0002 is missing"},
		{"no down", fstest.MapFS{"0001_a.up.sql": file("x")}, "needs both"},
		{"bad name", fstest.MapFS{"1_a.sql": file("x")}, "is not named"},
		{"two names", fstest.MapFS{"0001_a.up.sql": file("x"), "0001_b.down.sql": file("x")}, "two names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.fs)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("load: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	ms, err := load(fstest.MapFS{"0002_b.down.sql": file("d2"), "0001_a.up.sql": file("u1"), "0001_a.down.sql": file("d1"), "0002_b.up.sql": file("u2")})
	if err != nil || len(ms) != 2 || ms[0].Name != "a" || ms[1].Up != "u2" {
		t.Errorf("load: %+v, %v", ms, err)
	}
}
