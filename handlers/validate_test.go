package handlers

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
)

func TestValidateCompletion(t *testing.T) {
	tests := []struct {
		body  string
		param string // "" = valid
	}{
		{`{"model":"m","prompt":"hi"}`, ""},
		{`{"model":"m","prompt":["a","b"],"n":2,"best_of":3,"temperature":2,"top_p":1,"logprobs":5,"stop":["a","b","c","d"],"logit_bias":{"50256":-100}}`, ""},
		{`{"model":"m","prompt":[[1,2],[3]],"seed":-5,"max_tokens":null}`, ""},
		{`{"prompt":"hi"}`, "model"},
		{`{"model":"m"}`, "prompt"},
		{`{"model":"m","prompt":5}`, "prompt"},
		{`{"model":"m","prompt":"x","best_of":21}`, "best_of"},
		{`{"model":"m","prompt":"x","best_of":2,"n":2}`, "best_of"},
		{`{"model":"m","prompt":"x","best_of":3,"stream":true}`, "best_of"},
		{`{"model":"m","prompt":"x","frequency_penalty":-2.5}`, "frequency_penalty"},
		{`{"model":"m","prompt":"x","presence_penalty":2.1}`, "presence_penalty"},
		{`{"model":"m","prompt":"x","logprobs":6}`, "logprobs"},
		{`{"model":"m","prompt":"x","max_tokens":-1}`, "max_tokens"},
		{`{"model":"m","prompt":"x","n":0}`, "n"},
		{`{"model":"m","prompt":"x","n":129}`, "n"},
		{`{"model":"m","prompt":"x","n":1.5}`, "n"},
		{`{"model":"m","prompt":"x","temperature":2.01}`, "temperature"},
		{`{"model":"m","prompt":"x","top_p":1.5}`, "top_p"},
		{`{"model":"m","prompt":"x","temperature":"hot"}`, "temperature"},
		{`{"model":"m","prompt":"x","stop":["a","b","c","d","e"]}`, "stop"},
		{`{"model":"m","prompt":"x","logit_bias":{"1":101}}`, "logit_bias"},
		{`{"model":"m","prompt":"x","stream_options":{"include_usage":true}}`, "stream_options"},
		{`{"model":"m","prompt":"x","echo":"yes"}`, "echo"},
	}
	for _, tt := range tests {
		err := validateCompletion([]byte(tt.body))
		if tt.param == "" {
			if err != nil {
				t.Errorf("%s: unexpected %v", tt.body, err)
			}
			continue
		}
		e, ok := err.(*apierror.Error)
		if !ok || e.Status != 400 || e.Param != tt.param {
			t.Errorf("%s: want 400 on %s, got %v", tt.body, tt.param, err)
		}
	}
}

// TestReadModelStream: the one-walk reader answers as gjson does, for
// every shape a client may send.
func TestReadModelStream(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o","stream":true}`,
		`{"stream":false,"model":"m"}`,
		`{"messages":[{"model":"inner","stream":true}],"model":"outer"}`,
		`{"model":"a\"b\u00e9","stream":"true"}`,
		`{"model":7,"stream":1}`,
		`{"model":null,"stream":null}`,
		`{"model":"first","model":"second","stream":true,"stream":false}`,
		`{"model":{"x":1},"stream":[true]}`,
		`{"messages":[{"role":"user","content":"` + strings.Repeat("x\\\"", 500) + `"}]}`,
		`{}`,
	} {
		m, s := readModelStream([]byte(body))
		wm, ws := gjson.Get(body, "model").String(), gjson.Get(body, "stream").Bool()
		if m != wm || s != ws {
			t.Errorf("%s: got %q %v, gjson %q %v", body, m, s, wm, ws)
		}
	}
}
