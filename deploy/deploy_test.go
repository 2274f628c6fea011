package deploy_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/zerolayer/zerolayer/contracts"
)

// The manifests are plain Kubernetes YAML put together by kustomize
// (kubectl apply -k overlays/gpu): each overlay lists the base and one
// worker variant. The tests read an overlay as kubectl would (without the
// namespace and image rewrites, which do not change what is checked),
// decode every document strictly into the API types (a misspelled field
// fails) and check how the pieces fit.

// kustomization is the part of a kustomization.yaml these manifests use.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// scaledObject is KEDA's ScaledObject (keda.sh/v1alpha1), as much of its
// spec as the manifests may use.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		Triggers        []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// bundle is one overlay's objects by kind.
type bundle struct {
	files       []string
	namespaces  []*corev1.Namespace
	configMaps  map[string]*corev1.ConfigMap
	services    []*corev1.Service
	deployments map[string]*appsv1.Deployment
	jobs        []*batchv1.Job
	pdbs        []*policyv1.PodDisruptionBudget
	scaled      []*scaledObject
}

// load reads the kustomization in dir and everything it lists, strictly.
func load(t *testing.T, dir string) *bundle {
	t.Helper()
	b := &bundle{configMaps: map[string]*corev1.ConfigMap{}, deployments: map[string]*appsv1.Deployment{}}
	b.kustomize(t, dir)
	return b
}

func (b *bundle) kustomize(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "kustomization.yaml")
	b.files = append(b.files, path)
	var k kustomization
	strict(t, path, readFile(t, path), &k)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("%s: %s %s", path, k.APIVersion, k.Kind)
	}
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err != nil {
			t.Fatalf("%s lists %s: %v", path, r, err)
		} else if st.IsDir() {
			b.kustomize(t, p)
			continue
		}
		b.files = append(b.files, p)
		for i, doc := range documents(readFile(t, p)) {
			b.decode(t, fmt.Sprintf("%s#%d", p, i), doc)
		}
	}
}

// decode decodes one document into the type of its kind, refusing
// unknown fields.
func (b *bundle) decode(t *testing.T, where string, doc []byte) {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		b.namespaces = append(b.namespaces, decodeAs[corev1.Namespace](t, where, doc))
	case "v1 ConfigMap":
		cm := decodeAs[corev1.ConfigMap](t, where, doc)
		b.configMaps[cm.Name] = cm
	case "v1 Service":
		b.services = append(b.services, decodeAs[corev1.Service](t, where, doc))
	case "apps/v1 Deployment":
		d := decodeAs[appsv1.Deployment](t, where, doc)
		if b.deployments[d.Name] != nil {
			t.Fatalf("%s: a second Deployment %s", where, d.Name)
		}
		b.deployments[d.Name] = d
	case "batch/v1 Job":
		b.jobs = append(b.jobs, decodeAs[batchv1.Job](t, where, doc))
	case "policy/v1 PodDisruptionBudget":
		b.pdbs = append(b.pdbs, decodeAs[policyv1.PodDisruptionBudget](t, where, doc))
	case "keda.sh/v1alpha1 ScaledObject":
		b.scaled = append(b.scaled, decodeAs[scaledObject](t, where, doc))
	default:
		t.Fatalf("%s: unexpected %s %s (teach the test its type)", where, tm.APIVersion, tm.Kind)
	}
}

func decodeAs[T any](t *testing.T, where string, doc []byte) *T {
	t.Helper()
	v := new(T)
	strict(t, where, doc, v)
	return v
}

// strict decodes YAML doc into v, failing on unknown or duplicate fields.
func strict(t *testing.T, where string, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// documents splits a YAML stream at its --- lines, dropping documents that
// hold only comments.
func documents(data []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		for _, line := range strings.Split(d, "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				out = append(out, []byte(d))
				break
			}
		}
	}
	return out
}

var overlays = []string{"gpu", "cpu"}

// TestManifestsDecodeStrictly loads each overlay, and checks that every
// YAML file under deploy/ belongs to one (or is the NATS chart's values).
func TestManifestsDecodeStrictly(t *testing.T) {
	used := map[string]bool{filepath.Join("nats", "values.yaml"): true}
	for _, o := range overlays {
		b := load(t, filepath.Join("overlays", o))
		for _, f := range b.files {
			used[filepath.Clean(f)] = true
		}
		if len(b.namespaces) != 1 || b.namespaces[0].Name != "zerolayer" {
			t.Errorf("%s: want the zerolayer Namespace", o)
		}
	}
	filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") && !used[p] {
			t.Errorf("%s is in no overlay", p)
		}
		return err
	})
}

// TestScaledObjectPerPriority: each overlay has one ScaledObject per
// priority class, scaling that class's worker Deployment (whose workers
// pull the class first) on the class's consumers of ZL_JOBS.
func TestScaledObjectPerPriority(t *testing.T) {
	for _, o := range overlays {
		b := load(t, filepath.Join("overlays", o))
		seen := map[contracts.Priority]bool{}
		targets := map[string]bool{}
		for _, so := range b.scaled {
			p := contracts.Priority(so.Labels["zerolayer.io/priority"])
			if !p.Valid() || seen[p] {
				t.Fatalf("%s: ScaledObject %s: priority label %q (unknown or repeated)", o, so.Name, p)
			}
			seen[p] = true
			target := so.Spec.ScaleTargetRef.Name
			d := b.deployments[target]
			if d == nil || targets[target] {
				t.Fatalf("%s: ScaledObject %s scales %q: not a Deployment, or one another ScaledObject scales", o, so.Name, target)
			}
			targets[target] = true
			args := containerArgs(t, &d.Spec.Template.Spec.Containers[0])
			if prios := flagValue(args, "priorities"); !strings.HasPrefix(prios+",", string(p)+",") {
				t.Errorf("%s: %s scales %s, whose workers pull %q, not %s first", o, so.Name, target, prios, p)
			}
			if d.Spec.Replicas != nil {
				t.Errorf("%s: Deployment %s sets replicas, which KEDA owns", o, target)
			}
			min, max := so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount
			if min == nil || max == nil || *min < 0 || *max < max32(*min, 1) {
				t.Errorf("%s: %s: replica bounds %v..%v", o, so.Name, min, max)
			}
			consumers := map[string]bool{}
			for _, tr := range so.Spec.Triggers {
				switch tr.Type {
				case "nats-jetstream":
					m := tr.Metadata
					if m["stream"] != contracts.StreamJobs || m["account"] != "ZEROLAYER" {
						t.Errorf("%s: %s: stream %q account %q", o, so.Name, m["stream"], m["account"])
					}
					if _, _, err := net.SplitHostPort(m["natsServerMonitoringEndpoint"]); err != nil {
						t.Errorf("%s: %s: natsServerMonitoringEndpoint %q: %v", o, so.Name, m["natsServerMonitoringEndpoint"], err)
					}
					if n, err := strconv.Atoi(m["lagThreshold"]); err != nil || n < 1 {
						t.Errorf("%s: %s: lagThreshold %q", o, so.Name, m["lagThreshold"])
					}
					consumers[m["consumer"]] = true
				case "prometheus":
					q := tr.Metadata["query"]
					if !strings.Contains(q, `consumer_name=~"jobs-`+string(p)+`-.+"`) || !strings.Contains(q, `stream_name="ZL_JOBS"`) {
						t.Errorf("%s: %s: query %q is not over the class's consumers", o, so.Name, q)
					}
					if n, err := strconv.Atoi(tr.Metadata["threshold"]); err != nil || n < 1 {
						t.Errorf("%s: %s: threshold %q", o, so.Name, tr.Metadata["threshold"])
					}
				default:
					t.Errorf("%s: %s: trigger type %q", o, so.Name, tr.Type)
				}
			}
			var want []string
			for _, bk := range contracts.AllBuckets() {
				want = append(want, contracts.ConsumerName(p, bk))
			}
			for _, c := range want {
				if !consumers[c] {
					t.Errorf("%s: %s has no nats-jetstream trigger on consumer %s", o, so.Name, c)
				}
			}
			if len(consumers) != len(want) {
				t.Errorf("%s: %s: nats-jetstream consumers %v, want %v", o, so.Name, consumers, want)
			}
		}
		for _, p := range contracts.Priorities() {
			if !seen[p] {
				t.Errorf("%s: no ScaledObject for priority %s", o, p)
			}
		}
	}
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// TestProbesAndPorts: every long-running container is probed alive on
// /healthz and ready on /readyz, on the port its --metrics-addr serves.
func TestProbesAndPorts(t *testing.T) {
	for _, o := range overlays {
		b := load(t, filepath.Join("overlays", o))
		for name, d := range b.deployments {
			for i := range d.Spec.Template.Spec.Containers {
				c := &d.Spec.Template.Spec.Containers[i]
				args := containerArgs(t, c)
				_, port, err := net.SplitHostPort(flagValue(args, "metrics-addr"))
				if err != nil {
					t.Errorf("%s: %s/%s: --metrics-addr: %v", o, name, c.Name, err)
					continue
				}
				for _, pr := range []struct {
					kind  string
					probe *corev1.Probe
					path  string
				}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
					if pr.probe == nil || pr.probe.HTTPGet == nil {
						t.Errorf("%s: %s/%s: no HTTP %s probe", o, name, c.Name, pr.kind)
						continue
					}
					g := pr.probe.HTTPGet
					if g.Path != pr.path {
						t.Errorf("%s: %s/%s: %s probe on %s, want %s", o, name, c.Name, pr.kind, g.Path, pr.path)
					}
					if got := containerPort(c, g.Port.String()); strconv.Itoa(int(got)) != port {
						t.Errorf("%s: %s/%s: %s probe on port %s (%d), --metrics-addr serves %s", o, name, c.Name, pr.kind, g.Port.String(), got, port)
					}
				}
			}
		}
	}
}

// containerPort resolves a probe's port (a name or a number) to a number.
func containerPort(c *corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port {
			return p.ContainerPort
		}
	}
	n, _ := strconv.Atoi(port)
	return int32(n)
}

// TestWorkersDevices: the GPU overlay's workers ask for one GPU each and
// run on CUDA; the CPU overlay's ask for none and run on the CPU. Both
// variants have the same Deployments.
func TestWorkersDevices(t *testing.T) {
	names := map[string][]string{}
	for _, o := range overlays {
		b := load(t, filepath.Join("overlays", o))
		for name, d := range b.deployments {
			if d.Spec.Template.Labels["app.kubernetes.io/component"] != "worker" {
				continue
			}
			names[o] = append(names[o], name)
			c := &d.Spec.Template.Spec.Containers[0]
			gpus := c.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
			device := flagValue(containerArgs(t, c), "device")
			switch o {
			case "gpu":
				if gpus.Value() != 1 || device != "cuda" || c.Image != "zerolayer-cuda" {
					t.Errorf("gpu: %s: nvidia.com/gpu limit %s, --device %q, image %s", name, gpus.String(), device, c.Image)
				}
			case "cpu":
				if !gpus.IsZero() || device != "cpu" || c.Image != "zerolayer" {
					t.Errorf("cpu: %s: nvidia.com/gpu limit %s, --device %q, image %s", name, gpus.String(), device, c.Image)
				}
			}
		}
		slices.Sort(names[o])
	}
	if len(names["gpu"]) != len(contracts.Priorities()) || !slices.Equal(names["gpu"], names["cpu"]) {
		t.Errorf("worker Deployments: gpu %v, cpu %v", names["gpu"], names["cpu"])
	}
}

// TestDisruptionBudgetsAndServices: every Deployment's pods are covered by
// one PodDisruptionBudget; the gateway runs at least two replicas behind a
// Service; the migrate Job runs migrate up; ConfigMap references resolve.
func TestDisruptionBudgetsAndServices(t *testing.T) {
	for _, o := range overlays {
		b := load(t, filepath.Join("overlays", o))
		for name, d := range b.deployments {
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("%s: %s: selector does not match its pods (%v)", o, name, err)
			}
			n := 0
			for _, pdb := range b.pdbs {
				s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if err != nil {
					t.Fatal(err)
				}
				if s.Matches(labels.Set(d.Spec.Template.Labels)) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%s: %s: %d PodDisruptionBudgets cover its pods, want 1", o, name, n)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				checkEnvRefs(t, b, o+": "+name, c.Env)
			}
		}
		gw := b.deployments["zerolayer-gateway"]
		if gw == nil || gw.Spec.Replicas == nil || *gw.Spec.Replicas < 2 {
			t.Fatalf("%s: gateway Deployment with 2+ replicas: %+v", o, gw)
		}
		served := false
		for _, s := range b.services {
			if labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(gw.Spec.Template.Labels)) {
				for _, p := range s.Spec.Ports {
					served = served || containerPort(&gw.Spec.Template.Spec.Containers[0], p.TargetPort.String()) == 8080
				}
			}
		}
		if !served {
			t.Errorf("%s: no Service reaches the gateway's :8080", o)
		}
		if len(b.jobs) != 1 {
			t.Fatalf("%s: %d Jobs, want the migrate Job", o, len(b.jobs))
		}
		j := b.jobs[0].Spec.Template.Spec
		if args := j.Containers[0].Args; !slices.Equal(args[:2], []string{"migrate", "up"}) || j.RestartPolicy == corev1.RestartPolicyAlways {
			t.Errorf("%s: migrate Job runs %v, restart %s", o, args, j.RestartPolicy)
		}
		checkEnvRefs(t, b, o+": migrate", j.Containers[0].Env)
	}
}

// checkEnvRefs checks that env's ConfigMap keys exist and its Secrets are
// the documented ones.
func checkEnvRefs(t *testing.T, b *bundle, where string, env []corev1.EnvVar) {
	t.Helper()
	secrets := map[string][]string{"zerolayer-nats": {"worker-password", "billing-password", "gateway-password"}, "zerolayer-postgres": {"url"}}
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			if cm := b.configMaps[r.Name]; cm == nil {
				t.Errorf("%s: env %s: no ConfigMap %s", where, e.Name, r.Name)
			} else if _, ok := cm.Data[r.Key]; !ok {
				t.Errorf("%s: env %s: ConfigMap %s has no %s", where, e.Name, r.Name, r.Key)
			}
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil && !slices.Contains(secrets[r.Name], r.Key) {
			t.Errorf("%s: env %s: Secret %s key %s is not documented in base/config.yaml", where, e.Name, r.Name, r.Key)
		}
	}
}

// containerArgs returns c's arguments (the zerolayer command line after
// the binary: the image's entrypoint is zerolayer, so c may not set a
// command).
func containerArgs(t *testing.T, c *corev1.Container) []string {
	t.Helper()
	if len(c.Command) > 0 {
		t.Fatalf("%s: sets command %v: the image's entrypoint is zerolayer", c.Name, c.Command)
	}
	return c.Args
}

// flagValue returns the value of --name in args ("" when absent).
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestCommandsAndFlags runs each container's arguments, $(VAR)s expanded
// from its env as the kubelet would, through a flag set made from the
// real command's help (go build ../cmd/zerolayer): every subcommand
// exists, every flag is the command's, every value parses as its type.
func TestCommandsAndFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the zerolayer binary")
	}
	bin := filepath.Join(t.TempDir(), "zerolayer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/zerolayer")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, o := range overlays {
		b := load(t, filepath.Join("overlays", o))
		type container struct {
			where string
			c     *corev1.Container
			cms   map[string]*corev1.ConfigMap
		}
		var cs []container
		for name, d := range b.deployments {
			for i := range d.Spec.Template.Spec.Containers {
				cs = append(cs, container{o + ": " + name, &d.Spec.Template.Spec.Containers[i], b.configMaps})
			}
		}
		for _, j := range b.jobs {
			cs = append(cs, container{o + ": " + j.Name, &j.Spec.Template.Spec.Containers[0], b.configMaps})
		}
		for _, c := range cs {
			if c.c.Image != "zerolayer" && c.c.Image != "zerolayer-cuda" {
				t.Errorf("%s: image %s, want zerolayer or zerolayer-cuda (set by the overlay's images)", c.where, c.c.Image)
			}
			args := expand(t, c.where, containerArgs(t, c.c), c.c.Env, c.cms)
			sub := args[:1]
			if args[0] == "migrate" {
				sub = args[:2]
			}
			fs := helpFlags(t, bin, sub)
			if err := fs.Parse(args[len(sub):]); err != nil {
				t.Errorf("%s: zerolayer %s: %v", c.where, strings.Join(args, " "), err)
			} else if fs.NArg() > 0 {
				t.Errorf("%s: zerolayer %s: stray arguments %v", c.where, strings.Join(args, " "), fs.Args())
			}
		}
	}
}

// expand replaces $(VAR) in args by the values env gives them.
func expand(t *testing.T, where string, args []string, env []corev1.EnvVar, cms map[string]*corev1.ConfigMap) []string {
	t.Helper()
	vals := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	sub := func(s string) string {
		return ref.ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-1]
			v, ok := vals[name]
			if !ok {
				t.Errorf("%s: %s refers to $(%s), which no earlier env entry sets", where, s, name)
			}
			return v
		})
	}
	for _, e := range env {
		switch {
		case e.ValueFrom == nil:
			vals[e.Name] = sub(e.Value)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			if cm := cms[e.ValueFrom.ConfigMapKeyRef.Name]; cm != nil {
				vals[e.Name] = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			}
		default:
			vals[e.Name] = "secret"
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = sub(a)
	}
	return out
}

// helpFlags returns a flag set with the flags `zerolayer SUB --help`
// lists: typed flags as such (int, float, duration, else string), the
// others boolean.
func helpFlags(t *testing.T, bin string, sub []string) *flag.FlagSet {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, append(slices.Clone(sub), "--help")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	help := out.String()
	if err != nil || !strings.Contains(help, "usage: zerolayer "+strings.Join(sub, " ")) {
		t.Fatalf("zerolayer %s --help: %v\n%s", strings.Join(sub, " "), err, help)
	}
	fs := flag.NewFlagSet(strings.Join(sub, " "), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, m := range regexp.MustCompile(`(?m)^  --([a-z0-9-]+)(?: (\S+))?$`).FindAllStringSubmatch(help, -1) {
		switch name, typ := m[1], m[2]; typ {
		case "":
			fs.Bool(name, false, "")
		case "int":
			fs.Int(name, 0, "")
		case "float":
			fs.Float64(name, 0, "")
		case "duration":
			fs.Duration(name, 0, "")
		default:
			fs.String(name, "", "")
		}
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		t.Fatalf("zerolayer %s --help lists no flags:\n%s", strings.Join(sub, " "), help)
	}
	return fs
}
