package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/producer/gateway"
	"github.com/zerolayer/zerolayer/worker/model/modeltest"
	"github.com/zerolayer/zerolayer/worker/workertest"
)

// TestThinkingAPIs: the hand-set thinking model (a real forward pass whose
// greedy output is a <think> block, then an answer) through the gateway.
// The Messages API answers the reasoning in a thinking block before the
// text, streamed as thinking_delta then text_delta; the chat completions
// API in message.reasoning_content and delta.reasoning_content. Thinking
// is switched off with Anthropic's thinking {type: disabled}, OpenAI's
// chat_template_kwargs.enable_thinking false or reasoning_effort none.
func TestThinkingAPIs(t *testing.T) {
	b := workertest.Setup(t, contracts.StreamsConfig{})
	path := workertest.ThinkerPath(t)
	b.StartWorker(t, workertest.NewThinkerExecutor(t, path), "w1")
	gw, err := gateway.New(b.Srv.Conn, gateway.Config{Keys: plainKeys(t, "key-acme", "acme"), Logger: workertest.Logger(t),
		Models: map[string]string{workertest.ThinkerName: path, workertest.ModelName: modeltest.StoriesPath(t)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	f := &gatewayFixture{t: t, url: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const question = `"messages": [{"role": "user", "content": "Is 221 a prime number?"}]`
	post := func(path, body string) map[string]any {
		t.Helper()
		resp, b := f.do(ctx, http.MethodPost, path, "key-acme", body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", path, body, resp.StatusCode, b)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	// Messages API.
	msg := post("/v1/messages", `{"model": "thinker", "max_tokens": 16, `+question+`}`)
	content, _ := msg["content"].([]any)
	if len(content) != 2 || content[0].(map[string]any)["type"] != "thinking" || content[0].(map[string]any)["thinking"] != workertest.ThinkerReasoning ||
		content[1].(map[string]any)["type"] != "text" || content[1].(map[string]any)["text"] != workertest.ThinkerAnswer {
		t.Errorf("messages: content %v", content)
	}
	msg = post("/v1/messages", `{"model": "thinker", "max_tokens": 16, "thinking": {"type": "disabled"}, `+question+`}`)
	if content, _ := msg["content"].([]any); len(content) != 1 || content[0].(map[string]any)["text"] != workertest.ThinkerAnswer {
		t.Errorf("messages, thinking disabled: content %v", content)
	}
	resp, body := f.do(ctx, http.MethodPost, "/v1/messages", "key-acme", `{"model": "thinker", "max_tokens": 16, "stream": true, `+question+`}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("messages stream: %d %s", resp.StatusCode, body)
	}
	var order []string
	var thinking, text strings.Builder
	for _, ev := range parseSSE(t, body) {
		var d struct {
			Index        int `json:"index"`
			ContentBlock struct {
				Type string `json:"type"`
			} `json:"content_block"`
			Delta struct {
				Type     string `json:"type"`
				Thinking string `json:"thinking"`
				Text     string `json:"text"`
			} `json:"delta"`
		}
		json.Unmarshal([]byte(ev.data), &d)
		switch ev.name {
		case "content_block_start":
			order = append(order, "start "+d.ContentBlock.Type+string(rune('0'+d.Index)))
		case "content_block_stop":
			order = append(order, "stop"+string(rune('0'+d.Index)))
		case "content_block_delta":
			switch d.Delta.Type {
			case "thinking_delta":
				thinking.WriteString(d.Delta.Thinking)
			case "text_delta":
				text.WriteString(d.Delta.Text)
			}
		}
	}
	if got := strings.Join(order, ", "); got != "start thinking0, stop0, start text1, stop1" ||
		strings.TrimSpace(thinking.String()) != workertest.ThinkerReasoning || text.String() != workertest.ThinkerAnswer {
		t.Errorf("messages stream: blocks %q, thinking %q, text %q", got, thinking.String(), text.String())
	}

	// Chat completions API.
	cc := post("/v1/chat/completions", `{"model": "thinker", "max_tokens": 16, `+question+`}`)
	m := cc["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if m["reasoning_content"] != workertest.ThinkerReasoning || m["content"] != workertest.ThinkerAnswer {
		t.Errorf("chat completions: message %v", m)
	}
	for _, off := range []string{`"chat_template_kwargs": {"enable_thinking": false}`, `"reasoning_effort": "none"`} {
		cc := post("/v1/chat/completions", `{"model": "thinker", "max_tokens": 16, `+off+`, `+question+`}`)
		m := cc["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		if _, has := m["reasoning_content"]; has || m["content"] != workertest.ThinkerAnswer {
			t.Errorf("chat completions with %s: message %v", off, m)
		}
	}
	resp, body = f.do(ctx, http.MethodPost, "/v1/chat/completions", "key-acme",
		`{"model": "thinker", "max_tokens": 16, "reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": false}, `+question+`}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "disagree") {
		t.Errorf("contradictory switches: %d %s", resp.StatusCode, body)
	}
	resp, body = f.do(ctx, http.MethodPost, "/v1/chat/completions", "key-acme", `{"model": "thinker", "max_tokens": 16, "stream": true, `+question+`}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat stream: %d %s", resp.StatusCode, body)
	}
	var reasoning strings.Builder
	text.Reset()
	for _, ev := range parseSSE(t, body) {
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev.data), &c) == nil && len(c.Choices) > 0 {
			reasoning.WriteString(c.Choices[0].Delta.ReasoningContent)
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if strings.TrimSpace(reasoning.String()) != workertest.ThinkerReasoning || text.String() != workertest.ThinkerAnswer {
		t.Errorf("chat stream: reasoning %q, content %q", reasoning.String(), text.String())
	}
}
