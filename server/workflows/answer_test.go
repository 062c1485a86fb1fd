package workflows_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
)

// factsSchema asks for {"facts": [string, ...]}.
var factsSchema = json.RawMessage(`{"type":"object","required":["facts"],` +
	`"properties":{"facts":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`)

func typedInput(prompt string) sessionSend {
	in := promptOf(prompt)
	in.Config.OutputSchema = factsSchema
	return in
}

// docs/contract.md §21.1: an answer that does not match the output schema
// is a malformed response of its turn: its usage is billed, a
// provider.stream_reset (malformed) precedes the retry, and the retry's
// valid answer completes the run with the parsed answer beside the text.
func TestTypedAnswerFailsValidationOnceThenPasses(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{
	  "failures":[{"kind":"text","text":["{\"facts\": \"not a list\"}"],"usage":{"input_tokens":7,"output_tokens":3}}],
	  "text":["`+"```json\\n"+`{\"facts\": [\"a\", ", "\"b\"]}\n`+"```"+`"],
	  "usage":{"input_tokens":9,"output_tokens":4}}]}`)
	res := env.execSession(t, typedInput("facts please"))

	resets := find[keel.ProviderStreamReset](t, res.Events)
	require.Len(t, resets, 1)
	require.Equal(t, keel.ResetMalformed, resets[0].Reason.Kind)
	require.Equal(t, 1, resets[0].Attempt)
	require.Contains(t, resets[0].Reason.Detail, "does not match the output schema")
	require.Contains(t, resets[0].Reason.Detail, "at /facts")

	ups := find[keel.UsageUpdated](t, res.Events)
	require.Len(t, ups, 2, "the refused answer is billed as a request of its own")
	require.Equal(t, int64(7), ups[0].Usage.InputTokens)
	require.Len(t, find[keel.ModelCallCompleted](t, res.Events), 1, "only the kept response completes a model call")

	done := find[keel.RunCompleted](t, res.Events)[0]
	require.JSONEq(t, `{"facts":["a","b"]}`, string(done.Answer))
	require.Equal(t, `{"facts":["a","b"]}`, string(res.Outcome.Answer), "compact JSON, the fence dropped")
	require.Contains(t, res.Outcome.Text, "```json", "the text stays as the model wrote it")
	var got struct {
		Facts []string `json:"facts"`
	}
	require.NoError(t, res.Outcome.DecodeAnswer(&got))
	require.Equal(t, []string{"a", "b"}, got.Facts)
	require.Equal(t, int64(9), res.Outcome.Usage.InputTokens, "kept usage counts the valid answer only")
	require.Equal(t, int64(16), res.Outcome.UsageTotal.InputTokens)
}

// Three answers that do not match exhaust the turn's malformed budget
// (docs/contract.md §4.2): the run fails with keel.MalformedResponse and
// no answer.
func TestTypedAnswerThatNeverMatchesFailsTheRun(t *testing.T) {
	bad := `{"kind":"text","text":["not json at all"]}`
	env := newRunEnv(t, `{"turns":[{"failures":[`+bad+`,`+bad+`,`+bad+`],"text":["{\"facts\":[]}"]}]}`)
	res := env.execSession(t, typedInput("facts please"))
	require.Equal(t, keel.StatusFailed, res.Outcome.Status)
	require.Equal(t, keel.CodeMalformedResponse, failure(t, res.Outcome).Code)
	require.Contains(t, failure(t, res.Outcome).Message, "malformed response after 3 attempts")
	require.Len(t, find[keel.ProviderStreamReset](t, res.Events), 2)
	require.Len(t, find[keel.UsageUpdated](t, res.Events), 3)
	require.Nil(t, res.Outcome.Answer)
	require.ErrorIs(t, res.Outcome.DecodeAnswer(new(any)), keel.ErrNoAnswer)
}

// A response that calls tools is no final answer: the schema applies to
// the text the run ends with, not to a step's commentary.
func TestTypedAnswerIgnoresToolSteps(t *testing.T) {
	env := newRunEnv(t, `{"turns":[
	  {"text":["let me look"],"tool_calls":[{"id":"c1","name":"echo","arguments":{"text":"x"}}]},
	  {"text":["{\"facts\":[\"x\"]}"]}]}`)
	in := typedInput("facts please")
	in.Config.Tools = []string{"echo"}
	res := env.execSession(t, in)
	require.Equal(t, keel.StatusCompleted, res.Outcome.Status)
	require.Empty(t, find[keel.ProviderStreamReset](t, res.Events))
	require.Equal(t, `{"facts":["x"]}`, string(res.Outcome.Answer))
}

// A run without a schema has no answer, whatever its text.
func TestUntypedRunHasNoAnswer(t *testing.T) {
	env := newRunEnv(t, `{"turns":[{"text":["{\"facts\":[]}"]}]}`)
	res := env.execSession(t, promptOf("hi"))
	require.Nil(t, res.Outcome.Answer)
	require.Nil(t, find[keel.RunCompleted](t, res.Events)[0].Answer)
}

// Hostile output schemas are refused at send, before history, as
// keel.InvalidInput or keel.TooLarge: not an object, over the size or
// nesting limit, not compiling, or naming another document, which is
// never fetched (docs/contract.md §21.1).
func TestHostileOutputSchemasAreRefusedAtSend(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"object"}`))
	}))
	defer srv.Close()
	deep := strings.Repeat(`{"items":`, api.MaxOutputSchemaDepth+1) + `{}` + strings.Repeat(`}`, api.MaxOutputSchemaDepth+1)
	huge := `{"description":"` + strings.Repeat("x", api.MaxOutputSchemaBytes) + `"}`
	cases := map[string]struct {
		schema string
		code   keel.Code
	}{
		"array":       {`[1,2]`, keel.CodeInvalidInput},
		"string":      {`"object"`, keel.CodeInvalidInput},
		"deep":        {deep, keel.CodeInvalidInput},
		"huge":        {huge, keel.CodeTooLarge},
		"bad-type":    {`{"type":"thing"}`, keel.CodeInvalidInput},
		"remote-ref":  {`{"$ref":"` + srv.URL + `/schema.json"}`, keel.CodeInvalidInput},
		"remote-meta": {`{"$schema":"` + srv.URL + `/meta.json","type":"object"}`, keel.CodeInvalidInput},
		"file-ref":    {`{"$ref":"file:///etc/passwd"}`, keel.CodeInvalidInput},
		// Issue 34: 1.4 KB whose check of one value evaluates 2^20
		// subschemas (docs/contract.md §21.1).
		"expanding-refs": {expandingSchema(20), keel.CodeInvalidInput},
	}
	env := newRunEnv(t, `{"turns":[{"text":["never"]}]}`)
	u := newUpdates(t, env)
	env.RegisterDelayedCallback(func() {
		for name, c := range cases {
			u.send(api.UpdateSend, name, api.SendRequest{Prompt: "hi",
				Config: &api.RunConfig{OutputSchema: json.RawMessage(c.schema)}})
		}
	}, 0)
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))
	require.Empty(t, u.accepted)
	for name, c := range cases {
		e := u.rejected[name]
		require.NotNil(t, e, name)
		require.Equal(t, c.code, e.Code, "%s: %s", name, e.Message)
		require.Less(t, len(e.Message), 1024, "%s: the message does not repeat the schema", name)
	}
	require.Zero(t, hits.Load(), "no reference was fetched")
}

// expandingSchema is the attack of an expanding $defs: each level of $defs an anyOf of
// two references to the level below, so that checking one value at one
// place evaluates 2^depth subschemas.
func expandingSchema(depth int) string {
	defs := []string{`"l0":{"type":"string"}`}
	for i := 1; i <= depth; i++ {
		defs = append(defs, fmt.Sprintf(`"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1))
	}
	return fmt.Sprintf(`{"$defs":{%s},"$ref":"#/$defs/l%d"}`, strings.Join(defs, ","), depth)
}

// A schema bounded at every place can still multiply across a value's
// nesting: each level checks the items twice, so an answer nested 40 deep
// whose innermost item fails would cost 2^40 evaluations in the session's
// workflow code. The answer is refused unchecked as a malformed response
// (docs/contract.md §21.1), and the session goes on to the next answer.
func TestCostlyAnswerIsMalformedInASession(t *testing.T) {
	schema := `{"type":"array","anyOf":[{"items":{"$ref":"#"}},{"items":{"$ref":"#"}}]}`
	deep, _ := json.Marshal(strings.Repeat("[", 40) + "1" + strings.Repeat("]", 40))
	costly := `{"kind":"text","text":[` + string(deep) + `]}`
	e := newSessionEnv(t, `{"turns":[{"failures":[`+costly+`],"text":["[[[]]]"]}]}`, &memSegments{})
	var sent api.SendResult
	e.RegisterDelayedCallback(func() {
		e.send(t, "typed", api.SendRequest{Prompt: "nest", Config: &api.RunConfig{OutputSchema: json.RawMessage(schema)}}, &sent)
	}, 0)
	e.ExecuteWorkflow(api.SessionWorkflowName, sessionInput("s1", api.RunConfig{}))

	c := continuedAs(t, e).Carry
	require.Equal(t, keel.StatusCompleted, c.Last.Status, "%+v", c.Last.Error)
	require.Equal(t, `[[[]]]`, string(c.Last.Answer))
	resets := find[keel.ProviderStreamReset](t, c.Tail)
	require.Len(t, resets, 1)
	require.Equal(t, keel.ResetMalformed, resets[0].Reason.Kind)
	require.Contains(t, resets[0].Reason.Detail, "too costly")
}
