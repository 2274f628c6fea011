package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
	"github.com/zerolayer/zerolayer/producer"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/model/prompt"
	"github.com/zerolayer/zerolayer/worker/sched"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// newEmbedGateway is newGateway with the bundle, for the tests that count
// what the worker published.
func newEmbedGateway(t *testing.T) (*gatewayFixture, *workertest.Bundle) {
	t.Helper()
	b := workertest.Setup(t, contracts.StreamsConfig{})
	b.StartWorker(t, workertest.NewSchedExecutor(t, sched.Config{}), "w1")
	gw, err := gateway.New(b.Srv.Conn, gateway.Config{Keys: plainKeys(t, "key-acme", "acme", "key-globex", "globex"),
		Models: map[string]string{workertest.ModelName: modeltest.StoriesPath(t)}, Logger: workertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	return &gatewayFixture{t: t, url: srv.URL}, b
}

// storiesTokens tokenizes text as an embedding job's string input is:
// raw, with BOS.
func storiesTokens(t *testing.T, text string) []int64 {
	t.Helper()
	p, err := prompt.Open(modeltest.StoriesPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ids, err := p.Prompt(text, prompt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// vec32 is an SDK vector as the float32 components the gateway sent: a
// float32 written as its shortest decimal reads back to the same float32.
func vec32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// norm is v's Euclidean length.
func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// TestEmbeddingsSDK: the official OpenAI SDK calls /v1/embeddings with a
// string, a list of strings, a list of token ids and a list of lists of
// them, in float and base64, with dimensions. Every vector is unit length;
// an input has the same vector (equal components) alone, in a batch of
// inputs, again, as its token ids and in base64; dimensions keeps the
// first components, renormalised; usage counts every input token.
func TestEmbeddingsSDK(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	oc := f.openaiClient("key-acme")
	const text, other = "Once upon a time", "The little dog ran home."
	ids, otherIDs := storiesTokens(t, text), storiesTokens(t, other)

	embed := func(what string, p openai.EmbeddingNewParams, n int) *openai.CreateEmbeddingResponse {
		t.Helper()
		p.Model = workertest.ModelName
		res, err := oc.Embeddings.New(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Object != "list" || res.Model != workertest.ModelName || len(res.Data) != n || res.Usage.TotalTokens != res.Usage.PromptTokens {
			t.Fatalf("%s: %s", what, res.RawJSON())
		}
		for i, d := range res.Data {
			if d.Index != int64(i) || d.Object != "embedding" || len(d.Embedding) == 0 || math.Abs(norm(vec32(d.Embedding))-1) > 1e-5 {
				t.Fatalf("%s: vector %d (norm %v): %s", what, i, norm(vec32(d.Embedding)), d.RawJSON())
			}
		}
		return res
	}

	one := embed("a string", openai.EmbeddingNewParams{Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}}, 1)
	v := vec32(one.Data[0].Embedding)
	if one.Usage.PromptTokens != int64(len(ids)) {
		t.Fatalf("a string of %d tokens: usage %s", len(ids), one.Usage.RawJSON())
	}
	width := len(v)
	t.Logf("%d tokens, %d components", len(ids), width)

	again := embed("the string again", openai.EmbeddingNewParams{Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}}, 1)
	if !slices.Equal(vec32(again.Data[0].Embedding), v) {
		t.Fatal("the same input, a second call: another vector")
	}

	many := embed("a list of strings", openai.EmbeddingNewParams{Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{text, other, text}}}, 3)
	if !slices.Equal(vec32(many.Data[0].Embedding), v) || !slices.Equal(vec32(many.Data[2].Embedding), v) {
		t.Fatal("an input among others: another vector than alone")
	}
	if slices.Equal(vec32(many.Data[1].Embedding), v) {
		t.Fatal("two different inputs: the same vector")
	}
	if many.Usage.PromptTokens != int64(2*len(ids)+len(otherIDs)) {
		t.Fatalf("usage of three inputs of %d, %d and %d tokens: %s", len(ids), len(otherIDs), len(ids), many.Usage.RawJSON())
	}

	tokens := embed("a list of token ids", openai.EmbeddingNewParams{Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: ids}}, 1)
	if !slices.Equal(vec32(tokens.Data[0].Embedding), v) || tokens.Usage.PromptTokens != int64(len(ids)) {
		t.Fatalf("the string's token ids: another vector, or usage %s", tokens.Usage.RawJSON())
	}
	lists := embed("a list of lists of token ids", openai.EmbeddingNewParams{Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{otherIDs, ids}}}, 2)
	if !slices.Equal(vec32(lists.Data[1].Embedding), v) || !slices.Equal(vec32(lists.Data[0].Embedding), vec32(many.Data[1].Embedding)) {
		t.Fatal("lists of token ids: other vectors than their strings'")
	}

	b64 := embed("base64", openai.EmbeddingNewParams{Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{text, other}},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64}, 2)
	if !strings.HasPrefix(b64.Data[0].JSON.Embedding.Raw(), `"`) {
		t.Fatalf("base64 asked, a vector sent as %.40s", b64.Data[0].JSON.Embedding.Raw())
	}
	if !slices.Equal(vec32(b64.Data[0].Embedding), v) || !slices.Equal(vec32(b64.Data[1].Embedding), vec32(many.Data[1].Embedding)) {
		t.Fatal("base64: other vectors than in floats")
	}

	const dims = 16
	short := embed("dimensions", openai.EmbeddingNewParams{Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)},
		Dimensions: openai.Int(dims), User: openai.String("user-1")}, 1)
	sv := vec32(short.Data[0].Embedding)
	if len(sv) != dims {
		t.Fatalf("dimensions %d: %d components", dims, len(sv))
	}
	head := norm(v[:dims])
	for i, x := range sv {
		if want := float64(v[i]) / head; math.Abs(float64(x)-want) > 1e-5 {
			t.Fatalf("dimensions %d: component %d is %v, the full vector's renormalised %v", dims, i, x, want)
		}
	}

	// /v1/models says the model embeds.
	models, err := oc.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || !strings.Contains(models.Data[0].RawJSON(), `"embeddings"`) {
		t.Fatalf("models: %v %+v", err, models)
	}
}

// TestEmbeddingsErrors: bad embeddings requests are refused with 400 (404
// for a model not served, 401 without a key) in OpenAI's error shape,
// with a stable code and, for a field at fault, the request's own field
// in param.
func TestEmbeddingsErrors(t *testing.T) {
	t.Parallel()
	f := newGateway(t)
	ctx := context.Background()
	tooMany := `"x"` + strings.Repeat(`,"x"`, contracts.MaxEmbeddingInputs)
	tooLong := "1" + strings.Repeat(",2", 4096)
	for _, tc := range []struct {
		name, body string
		status     int
		code       contracts.Code
		param      string
	}{
		{"no input", `{"model":"stories260k"}`, 400, contracts.CodeInvalidRequest, "input"},
		{"null input", `{"model":"stories260k","input":null}`, 400, contracts.CodeInvalidRequest, "input"},
		{"empty string", `{"model":"stories260k","input":""}`, 400, contracts.CodeInvalidRequest, "input"},
		{"empty list", `{"model":"stories260k","input":[]}`, 400, contracts.CodeInvalidRequest, "input"},
		{"an empty string in a list", `{"model":"stories260k","input":["a",""]}`, 400, contracts.CodeInvalidRequest, "input[1]"},
		{"an empty token list", `{"model":"stories260k","input":[[1,2],[]]}`, 400, contracts.CodeInvalidRequest, "input[1]"},
		{"a negative token id", `{"model":"stories260k","input":[1,-2]}`, 400, contracts.CodeInvalidRequest, "input[1]"},
		{"a fraction", `{"model":"stories260k","input":[[1],[2,3.5]]}`, 400, contracts.CodeInvalidRequest, "input[1][1]"},
		{"a token id too large", `{"model":"stories260k","input":[4294967296]}`, 400, contracts.CodeInvalidRequest, "input[0]"},
		{"a string among token ids", `{"model":"stories260k","input":[1,"a"]}`, 400, contracts.CodeInvalidRequest, "input[1]"},
		{"a boolean", `{"model":"stories260k","input":[true]}`, 400, contracts.CodeInvalidRequest, "input[0]"},
		{"an object", `{"model":"stories260k","input":{"text":"a"}}`, 400, contracts.CodeInvalidRequest, "input"},
		{"a number", `{"model":"stories260k","input":3}`, 400, contracts.CodeInvalidRequest, "input"},
		{"too many inputs", `{"model":"stories260k","input":[` + tooMany + `]}`, 400, contracts.CodeInvalidRequest, "input"},
		{"an encoding", `{"model":"stories260k","input":"a","encoding_format":"hex"}`, 400, contracts.CodeInvalidRequest, "encoding_format"},
		{"zero dimensions", `{"model":"stories260k","input":"a","dimensions":0}`, 400, contracts.CodeInvalidRequest, "dimensions"},
		{"negative dimensions", `{"model":"stories260k","input":"a","dimensions":-3}`, 400, contracts.CodeInvalidRequest, "dimensions"},
		// Refused by the worker, which knows the model.
		{"dimensions above the width", `{"model":"stories260k","input":"a","dimensions":100000}`, 400, contracts.CodeInvalidRequest, ""},
		{"a token id not in the vocabulary", `{"model":"stories260k","input":[1,100000]}`, 400, contracts.CodeInvalidRequest, ""},
		{"longer than the context", `{"model":"stories260k","input":[[1],[` + tooLong + `]]}`, 400, contracts.CodePromptTooLong, ""},
		{"no model", `{"input":"a"}`, 400, contracts.CodeInvalidRequest, "model"},
		{"a model not served", `{"model":"gpt-0","input":"a"}`, 404, contracts.CodeUnknownModel, ""},
		{"bad JSON", `{"model":`, 400, contracts.CodeMalformedJSON, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.do(ctx, "POST", "/v1/embeddings", "key-acme", tc.body)
			var e struct {
				Error struct {
					Type, Message string
					Code          contracts.Code
					Param         *string
				}
			}
			if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.param)) {
				t.Fatalf("param: want %s: %s", tc.param, body)
			}
			if want := map[int]string{400: "invalid_request_error", 404: "not_found_error"}[tc.status]; e.Error.Type != want {
				t.Fatalf("type %q, want %q: %s", e.Error.Type, want, body)
			}
		})
	}
	if resp, body := f.do(ctx, "POST", "/v1/embeddings", "", `{"model":"stories260k","input":"a"}`); resp.StatusCode != 401 || errorCode(t, body) != contracts.CodeUnauthenticated {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
}

// embeddingLine is one line of an OpenAI batch input file calling
// /v1/embeddings with body.
func embeddingLine(customID string, body map[string]any) string {
	body["model"] = workertest.ModelName
	b, _ := json.Marshal(map[string]any{"custom_id": customID, "method": "POST", "url": "/v1/embeddings", "body": body})
	return string(b) + "\n"
}

// embedBatchLines is how many lines TestOpenAIBatchEmbeddings's OpenAI
// batch has, besides two refused ones; run it bigger by hand:
//
//	go test -run TestOpenAIBatchEmbeddings ./producer/gateway -embed-batch-lines 10000
var embedBatchLines = flag.Int("embed-batch-lines", 300, "lines of TestOpenAIBatchEmbeddings's batch")

// TestOpenAIBatchEmbeddings: an OpenAI batch mixing embeddings lines
// (strings, lists, token ids, base64, dimensions) and chat completion
// lines completes with every line in the output or error file exactly
// once, each embeddings line answered with the embeddings API's body, the
// same vectors as a call of its own, and one usage record per line that
// ran (kind embedding for the embeddings). The native batches take
// embedding job lines as they are.
func TestOpenAIBatchEmbeddings(t *testing.T) {
	t.Parallel()
	f, b := newEmbedGateway(t)
	ctx := context.Background()
	oc := f.openaiClient("key-acme")
	const text = "Once upon a time"

	lines := *embedBatchLines
	var in strings.Builder
	kinds := map[string]string{} // custom_id: chat, or what the embeddings line asks
	embedLines := 0
	for i := range lines {
		id := fmt.Sprintf("line-%03d", i)
		switch i % 6 {
		case 0:
			in.WriteString(chatLine(id, fmt.Sprintf("Once upon a time %d", i), 2))
			kinds[id] = "chat"
			continue
		case 1:
			in.WriteString(embeddingLine(id, map[string]any{"input": text}))
			kinds[id] = "text"
		case 2:
			in.WriteString(embeddingLine(id, map[string]any{"input": []string{fmt.Sprintf("The cat %d sat.", i), text}}))
			kinds[id] = "two"
		case 3:
			in.WriteString(embeddingLine(id, map[string]any{"input": text, "encoding_format": "base64"}))
			kinds[id] = "base64"
		case 4:
			in.WriteString(embeddingLine(id, map[string]any{"input": [][]int{{1, 2 + i%300, 3}, {1, 40}}}))
			kinds[id] = "tokens"
		case 5:
			in.WriteString(embeddingLine(id, map[string]any{"input": text, "dimensions": 8}))
			kinds[id] = "dims"
		}
		embedLines++
	}
	// Refused: an empty input, by the gateway; a model not served, at
	// submit.
	in.WriteString(`{"custom_id":"empty","method":"POST","url":"/v1/embeddings","body":{"model":"stories260k","input":[]}}` + "\n")
	in.WriteString(`{"custom_id":"no such model","method":"POST","url":"/v1/embeddings","body":{"model":"gpt-0","input":"a"}}` + "\n")

	single, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: workertest.ModelName, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}})
	if err != nil {
		t.Fatal(err)
	}
	v := vec32(single.Data[0].Embedding)

	file := uploadBatchFile(t, oc, in.String())
	batch, err := oc.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1Embeddings,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil || batch.Endpoint != "/v1/embeddings" || batch.RequestCounts.Total != int64(lines+2) {
		t.Fatalf("new batch: %v %+v", err, batch)
	}
	natstest.Until(t, max(90*time.Second, time.Duration(lines)*20*time.Millisecond), "the end of batch "+batch.ID, func() bool {
		if batch, err = oc.Batches.Get(ctx, batch.ID); err != nil {
			t.Fatal(err)
		}
		return batch.Status != "in_progress" && batch.Status != "finalizing"
	})
	if batch.Status != "completed" || !countsAre(batch, int64(lines+2), int64(lines), 2) {
		t.Fatalf("batch %s", batch.RawJSON())
	}
	seen := map[string]int{}
	for _, o := range fileLines(t, oc, batch.OutputFileID) {
		seen[o.CustomID]++
		kind := kinds[o.CustomID]
		if o.Response == nil || o.Response.StatusCode != 200 || kind == "" {
			t.Fatalf("output line %+v", o)
		}
		if kind == "chat" {
			var cc openai.ChatCompletion
			if json.Unmarshal(o.Response.Body, &cc) != nil || cc.Object != "chat.completion" || cc.Usage.CompletionTokens != 2 {
				t.Fatalf("chat line %s: %s", o.CustomID, o.Response.Body)
			}
			continue
		}
		var er openai.CreateEmbeddingResponse
		if err := json.Unmarshal(o.Response.Body, &er); err != nil || er.Object != "list" || er.Model != workertest.ModelName || er.Usage.PromptTokens == 0 {
			t.Fatalf("embeddings line %s: %v %s", o.CustomID, err, o.Response.Body)
		}
		n := map[string]int{"two": 2, "tokens": 2}[kind]
		if len(er.Data) != max(n, 1) {
			t.Fatalf("embeddings line %s: %d vectors", o.CustomID, len(er.Data))
		}
		got := vec32(er.Data[len(er.Data)-1].Embedding)
		switch kind {
		case "text", "two", "base64":
			if !slices.Equal(got, v) {
				t.Fatalf("embeddings line %s (%s): another vector than the call's", o.CustomID, kind)
			}
		case "dims":
			if len(got) != 8 || math.Abs(norm(got)-1) > 1e-5 {
				t.Fatalf("embeddings line %s: dimensions 8: %v", o.CustomID, got)
			}
		}
		if raw := string(er.Data[0].JSON.Embedding.Raw()); strings.HasPrefix(raw, `"`) != (kind == "base64") {
			t.Fatalf("embeddings line %s (%s): vector sent as %.30s", o.CustomID, kind, raw)
		}
	}
	errs := fileLines(t, oc, batch.ErrorFileID)
	for _, o := range errs {
		seen[o.CustomID]++
	}
	if len(errs) != 2 || errs[0].CustomID != "empty" || errs[0].Response.StatusCode != 400 || errs[1].CustomID != "no such model" || errs[1].Response.StatusCode != 404 ||
		!strings.Contains(string(errs[0].Response.Body), `"param":"input"`) {
		t.Fatalf("error lines %+v", errs)
	}
	if len(seen) != lines+2 {
		t.Fatalf("%d lines answered of %d", len(seen), lines+2)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("line %s answered %d times", id, n)
		}
	}

	// The native batch: embedding jobs as lines, their vectors in the
	// results.
	var native strings.Builder
	for i := range 4 {
		fmt.Fprintf(&native, `{"custom_id":"e%d","request":{"model":"stories260k","embedding":{"input":[%q,[1,2,3]]}}}`+"\n", i, text)
	}
	native.WriteString(`{"custom_id":"c","request":{"model":"stories260k","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}}` + "\n")
	if resp, body := f.do(ctx, "POST", "/v1/zl/batches?id=native-embed", "key-acme", native.String()); resp.StatusCode != 202 {
		t.Fatalf("native batch: %d %s", resp.StatusCode, body)
	}
	if st := f.waitBatch(ctx, "native-embed"); st.Error != "" || st.Counts.Completed != 5 {
		t.Fatalf("native batch %+v", st)
	}
	_, body := f.do(ctx, "GET", "/v1/zl/batches/native-embed/output", "key-acme", "")
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	n := 0
	for ; sc.Scan(); n++ {
		var rec producer.BatchRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Result == nil || rec.Result.Status != contracts.StatusCompleted {
			t.Fatalf("native record %s: %v", sc.Bytes(), err)
		}
		if rec.CustomID == "c" {
			continue
		}
		if len(rec.Result.Embeddings) != 2 || !slices.Equal(rec.Result.Embeddings[0], v) || rec.Result.Usage == nil || rec.Result.Usage.Kind != contracts.KindEmbedding {
			t.Fatalf("native embedding record %s", sc.Bytes())
		}
	}
	if n != 5 {
		t.Fatalf("%d native records", n)
	}

	// One usage record per job that ran: the call, the OpenAI batch's
	// lines, the native batch's.
	b.WaitDrained(t)
	embeds, chats := 0, 0
	for _, m := range workertest.StreamMsgs(t, b.Srv.JS, contracts.StreamUsage, contracts.UsageSubject("acme")) {
		u, err := contracts.DecodeUsage(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case u.Kind == contracts.KindEmbedding && u.OutputTokens == 0 && u.InputTokens > 0:
			embeds++
		case u.Kind == "":
			chats++
		default:
			t.Fatalf("usage record %s", m.Data())
		}
	}
	if wantE, wantC := 1+embedLines+4, lines-embedLines+1; embeds != wantE || chats != wantC {
		t.Fatalf("usage records: %d of embeddings, %d of chats; want %d and %d", embeds, chats, wantE, wantC)
	}
}
