package billing

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestRoomsImports fails when a package of billing imports more of ours
// than its doc.go allows: price only contracts, the ledger only price and
// contracts (never finance: the door opens one way), finance the ledger,
// price and contracts (each with the packages below it).
func TestRoomsImports(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list dependencies with")
	}
	const mod = "github.com/zerolayer/zerolayer/"
	for pkg, allowed := range map[string][]string{
		"billing/price":   {"contracts"},
		"billing/ledger":  {"billing/price", "contracts"},
		"billing/finance": {"billing/ledger", "billing/price", "contracts"},
	} {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, d := range strings.Fields(string(out)) {
			rel, ours := strings.CutPrefix(d, mod)
			if !ours || rel == pkg {
				continue
			}
			if !slices.ContainsFunc(allowed, func(a string) bool { return rel == a || strings.HasPrefix(rel, a+"/") }) {
				t.Errorf("%s imports %s; it may import %v of ours", pkg, rel, allowed)
			}
		}
	}
}
