package cuda

import (
	"embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/quant"
)

//go:embed kernels/*.ptx
var testPTX embed.FS

// TestKernelSpecsMatchPTX checks every kernel the backend launches against
// the committed PTX: it exists in its module, with the parameter types the
// Go side passes. A kernel whose signature changed without `make kernels`,
// or a spec out of step with its kernel, fails here, without a device.
func TestKernelSpecsMatchPTX(t *testing.T) {
	if len(mmTypes)*len(mmTiles) != numMMKernels || len(kernelSpecs) != int(numKernels) {
		t.Fatalf("%d types × %d tiles, %d specs; constants say %d matmul kernels, %d in all",
			len(mmTypes), len(mmTiles), len(kernelSpecs), numMMKernels, numKernels)
	}
	entry := regexp.MustCompile(`(?s)\.visible \.entry (\w+)\((.*?)\)`)
	param := regexp.MustCompile(`\.param \.(\w+)`)
	ptxType := map[argKind]string{aPtr: "u64", aInt: "u32", aF32: "f32", aF64: "f64"}
	entries := map[string]string{} // kernel -> module
	params := map[string][]string{}
	for _, mod := range kernelModules {
		src, err := testPTX.ReadFile("kernels/" + mod + ".ptx")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), ".target sm_80") {
			t.Errorf("%s.ptx does not target sm_80 (compute_80); run make kernels", mod)
		}
		for _, m := range entry.FindAllStringSubmatch(string(src), -1) {
			entries[m[1]] = mod
			for _, p := range param.FindAllStringSubmatch(m[2], -1) {
				params[m[1]] = append(params[m[1]], p[1])
			}
		}
	}
	missing := 0
	for _, s := range kernelSpecs {
		mod, ok := entries[s.name]
		if !ok && optionalKernels[s.name] {
			// The backend loads without it and refuses what needs it.
			t.Logf("kernel %s: not in %s.ptx yet (optional; run make kernels)", s.name, s.module)
			missing++
			continue
		}
		if !ok || mod != s.module {
			t.Errorf("kernel %s: not in %s.ptx (found in %q)", s.name, s.module, mod)
			continue
		}
		var want []string
		for _, a := range s.args {
			want = append(want, ptxType[a])
		}
		if fmt.Sprint(want) != fmt.Sprint(params[s.name]) {
			t.Errorf("kernel %s: Go passes %v, the PTX takes %v", s.name, want, params[s.name])
		}
	}
	if len(entries) != len(kernelSpecs)-missing {
		t.Errorf("the PTX has %d kernels, the specs %d (%d optional ones missing)", len(entries), len(kernelSpecs), missing)
	}
}

func TestMMKernel(t *testing.T) {
	for _, c := range []struct {
		t    gpu.DType
		m    int
		name string
		tile int
	}{
		{gpu.F32, 1, "mm_f32_1", 1},
		{gpu.F16, 2, "mm_f16_2", 2},
		{gpu.BF16, 3, "mm_bf16_4", 4},
		{gpu.Q8_0, 8, "mm_q8_0_8", 8},
		{gpu.Q6_K, 64, "mm_q6_k_8", 8},
		{gpu.Q4_K, 5, "mm_q4_k_8", 8},
	} {
		k, tile := mmKernel(c.t, c.m)
		if kernelSpecs[k].name != c.name || tile != c.tile {
			t.Errorf("mmKernel(%v, %d) = %s, %d; want %s, %d", c.t, c.m, kernelSpecs[k].name, tile, c.name, c.tile)
		}
	}
}

// TestPack checks that the device layout decodes, the way the kernels
// decode it, to exactly what quant.Dequantize gives for the GGML layout.
func TestPack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range gpu.DTypes {
		if !hasMMKernel(dt) {
			_, err := pack(dt, 1, 256, make([]byte, dt.BlockBytes()*256/dt.BlockSize()))
			if !errors.Is(err, gpu.ErrUnsupportedType) || !strings.Contains(err.Error(), dt.String()+" on cuda") {
				t.Errorf("%v: pack error %v, want unsupported %v on cuda", dt, err, dt)
			}
			continue
		}
		for _, cols := range []int{256, 512, 172, 36} {
			if cols%dt.BlockSize() != 0 {
				continue
			}
			const rows = 5
			raw := make([]float32, rows*cols)
			for i := range raw {
				raw[i] = float32(r.NormFloat64())
			}
			data, err := quant.Quantize(dt, raw)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, rows*cols)
			if err := quant.Dequantize(dt, data, want); err != nil {
				t.Fatal(err)
			}
			p, err := pack(dt, rows, cols, data)
			if err != nil {
				t.Fatalf("%v %d: %v", dt, cols, err)
			}
			if p.kp%8 != 0 && (dt == gpu.F32 || dt == gpu.F16 || dt == gpu.BF16) {
				t.Errorf("%v %d: padded row of %d elements", dt, cols, p.kp)
			}
			for i, o := range p.off {
				if o%packAlign != 0 {
					t.Errorf("%v %d: section %d at %d", dt, cols, i, o)
				}
			}
			got := make([]float32, cols)
			for row := 0; row < rows; row++ {
				p.dequantRow(row, got)
				for e := range got {
					if got[e] != want[row*cols+e] {
						t.Fatalf("%v %d×%d: element [%d][%d] = %g, want %g", dt, rows, cols, row, e, got[e], want[row*cols+e])
					}
				}
			}
		}
	}
	if _, err := pack(gpu.Q8_0, 2, 64, make([]byte, 10)); err == nil {
		t.Error("pack accepted data of the wrong size")
	}
}
