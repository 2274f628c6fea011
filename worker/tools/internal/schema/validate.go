package schema

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator is the second check of json_validator: the output (and,
// at compile time, every enum/const literal) is validated with
// santhosh-tekuri/jsonschema, a well-kept draft 4 – 2020-12 validator.
// With assertFormats, the formats the grammar enforces are asserted too
// (the grammar's patterns accept a subset of what the validator's checks
// accept, so this is a second check of them) and the validator's other
// formats stay annotations; without it, format follows the draft's
// default (an annotation from 2019-09 on), as the official test suite
// expects.
type Validator struct {
	mu    sync.Mutex // the compiler is not safe for concurrent use
	c     *jsonschema.Compiler
	url   string
	byPtr map[string]*jsonschema.Schema
}

// refusingLoader refuses every external reference: compiling a request's
// schema never reads files or the network.
type refusingLoader struct{}

func (refusingLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed; inline it under $defs", u)
}

// validatorFormats are the formats santhosh-tekuri/jsonschema checks.
var validatorFormats = []string{"json-pointer", "relative-json-pointer", "uuid", "duration", "period",
	"ipv4", "ipv6", "hostname", "email", "date", "time", "date-time", "uri", "iri", "uri-reference",
	"iri-reference", "uri-template", "semver"}

// newValidator loads raw (the schema's JSON text) under rootURL.
// loader resolves remote references; nil refuses them.
func newValidator(raw []byte, rootURL string, loader jsonschema.URLLoader, assertFormats bool) (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if loader == nil {
		loader = refusingLoader{}
	}
	c.UseLoader(loader)
	if assertFormats {
		c.AssertFormat()
		for _, f := range validatorFormats {
			if _, enforced := FormatPatterns[f]; !enforced {
				c.RegisterFormat(&jsonschema.Format{Name: f, Validate: func(any) error { return nil }})
			}
		}
	}
	if err := c.AddResource(rootURL, doc); err != nil {
		return nil, err
	}
	return &Validator{c: c, url: rootURL, byPtr: map[string]*jsonschema.Schema{}}, nil
}

// at compiles the subschema at JSON pointer ptr.
func (v *Validator) at(ptr string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.byPtr[ptr]; ok {
		return s, nil
	}
	loc := v.url
	if ptr != "" {
		toks := strings.Split(ptr[1:], "/")
		for i, t := range toks {
			toks[i] = url.PathEscape(t)
		}
		loc += "#/" + strings.Join(toks, "/")
	}
	s, err := v.c.Compile(loc)
	if err != nil {
		return nil, err
	}
	v.byPtr[ptr] = s
	return s, nil
}

// validate checks inst (as jsonschema.UnmarshalJSON decodes it) against the
// subschema at ptr.
func (v *Validator) validate(ptr string, inst any) error {
	s, err := v.at(ptr)
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// ValidateText parses text as JSON and validates it against the root.
func (v *Validator) ValidateText(text []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return fmt.Errorf("output is not JSON: %w", err)
	}
	return v.validate("", inst)
}

// ValidationSummary shortens a validator error to one line.
func ValidationSummary(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		s := strings.ReplaceAll(ve.Error(), "\n", "; ")
		if len(s) > 300 {
			s = s[:297] + "..."
		}
		return s
	}
	return err.Error()
}
