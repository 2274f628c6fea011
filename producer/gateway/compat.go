package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// The headers the compatible APIs' clients read a request's id from: the
// Anthropic SDKs read request-id, the OpenAI SDKs x-request-id. Both are
// on every answer: a random req_ id, or the job id where the call made a
// job.
const (
	RequestIDHeader       = "request-id"
	OpenAIRequestIDHeader = "x-request-id"
)

// AnthropicVersionHeader names the Messages API version a client speaks.
// A request without it is taken as DefaultAnthropicVersion; one with a
// value that is not a date (YYYY-MM-DD) is refused. Every dated version
// is served the same way: the gateway implements one shape of each call.
const (
	AnthropicVersionHeader  = "anthropic-version"
	DefaultAnthropicVersion = "2023-06-01"
)

// setRequestID sets both request id headers to id.
func setRequestID(w http.ResponseWriter, id string) {
	w.Header().Set(RequestIDHeader, id)
	w.Header().Set(OpenAIRequestIDHeader, id)
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// anthropicCall reports whether r is a call of the Anthropic API: under
// /v1/messages, or from a client that names the API's version (the
// models endpoints serve both APIs).
func anthropicCall(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/v1/messages") || r.Header.Get(AnthropicVersionHeader) != ""
}

// nativeCall reports whether r is a call of zerolayer's own API.
func nativeCall(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/v1/jobs") || strings.HasPrefix(r.URL.Path, NativeBatches)
}

// errorWriter answers errors in the shape of r's API.
func errorWriter(r *http.Request) func(http.ResponseWriter, *contracts.Error) {
	switch {
	case anthropicCall(r):
		return anthropicError
	case nativeCall(r):
		return jobError
	default:
		return openAIError
	}
}

// compat wraps the routes with what every answer shares: the request id
// headers, and the Anthropic version check.
func (g *Gateway) compat(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setRequestID(w, newRequestID())
		if anthropicCall(r) {
			v := r.Header.Get(AnthropicVersionHeader)
			if v == "" {
				r.Header.Set(AnthropicVersionHeader, DefaultAnthropicVersion)
			} else if _, err := time.Parse(time.DateOnly, v); err != nil {
				anthropicError(w, contracts.NewError(contracts.CodeInvalidRequest,
					"%s %q: want a version date such as %s", AnthropicVersionHeader, v, DefaultAnthropicVersion))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// unrouted answers a path no route serves (404), or serves with other
// methods (405, with Allow), in the shape of the caller's API, instead of
// the plain text of http.ServeMux.
func (g *Gateway) unrouted(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		fail := errorWriter(r)
		if len(allow) > 0 && !slices.Contains(allow, r.Method) {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			fail(w, contracts.NewError(contracts.CodeMethodNotAllowed, "%s %s: this path takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		fail(w, contracts.NewError(contracts.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	}
}
