package main

import (
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/migrations/dbtest"
)

// TestTenantsSetLimits: set-limits stores what its flags give and keeps
// the rest; none removes a limit; limits lists them.
func TestTenantsSetLimits(t *testing.T) {
	db := schemaURL(t, dbtest.Pool(t))
	for _, args := range [][]string{
		{"acme", "--rpm", "60", "--concurrency", "4", "--monthly-spend", "100.00"},
		{"acme", "--tpm", "5000", "--concurrency", "none"},
		{"beta", "--rpm", "0", "--currency", "EUR", "--monthly-spend", "5"},
	} {
		if code, _, errOut := runCLI(append([]string{"tenants", "set-limits", "--database-url", db}, args...)...); code != 0 {
			t.Fatalf("set-limits %v: status %d, %s", args, code, errOut)
		}
	}
	code, out, errOut := runCLI("tenants", "limits", "--database-url", db)
	if code != 0 {
		t.Fatalf("limits: status %d, %s", code, errOut)
	}
	for _, want := range []string{"TENANT", "acme    60   5000  none", "100 USD", "beta    0    none  none", "5 EUR"} {
		if !strings.Contains(out, want) {
			t.Errorf("limits output lacks %q:\n%s", want, out)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"set-limits"}, "give one tenant"},
		{[]string{"set-limits", "acme", "--rpm", "-1"}, "want a whole number ≥ 0, or none"},
		{[]string{"set-limits", "acme", "--monthly-spend", "lots"}, "want a decimal amount"},
	} {
		code, _, errOut := runCLI(append(append([]string{"tenants"}, tt.args...), "--database-url", db)...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: status %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}
