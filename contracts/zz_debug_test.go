package contracts
import ("os";"testing";"time")
func FuzzDebugHang(f *testing.F) {
	b, _ := os.ReadFile("testdata/job_request.json"); f.Add(b)
	b, _ = os.ReadFile("testdata/job_request_regex.json"); f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		os.WriteFile("/tmp/cur_input", b, 0o644)
		st := time.Now()
		DecodeJobRequest(b, Limits{MaxRequestBytes: 1 << 16})
		if d := time.Since(st); d > time.Second { os.WriteFile("/tmp/slow_input", b, 0o644) }
	})
}
