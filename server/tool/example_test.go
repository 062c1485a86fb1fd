package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelrun/keel/server/tool"
)

type greetArgs struct {
	Name  string `json:"name" jsonschema:"description=Who to greet."`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=3"`
}

func ExampleNew() {
	greet := tool.New("greet", "Greet someone.",
		func(ctx context.Context, args greetArgs) (string, error) {
			return strings.TrimSpace(strings.Repeat("Hello, "+args.Name+"! ", max(args.Times, 1))), nil
		})

	fmt.Println(string(greet.Spec().Parameters))
	res, _ := greet.Call(context.Background(), json.RawMessage(`{"name":"Ada","times":2}`))
	fmt.Println(res.Output)
	// Bad arguments never reach the function; the model gets an error result.
	res, _ = greet.Call(context.Background(), json.RawMessage(`{"times":9}`))
	fmt.Println(res.IsError, res.Output)
	// Output:
	// {"properties":{"name":{"type":"string","description":"Who to greet."},"times":{"type":"integer","maximum":3,"minimum":1}},"additionalProperties":false,"type":"object","required":["name"]}
	// Hello, Ada! Hello, Ada!
	// true invalid arguments for tool "greet": at /times: maximum: got 9, want 3; missing property 'name'
}

func ExampleAsk() {
	deploy := tool.New("deploy", "Deploy the service.",
		func(ctx context.Context, _ struct{}) (string, error) {
			// Ask before the side effect: the call runs again from the
			// start once the host has answered.
			ok, err := tool.Ask(ctx, tool.Question{ID: "confirm", Prompt: "Deploy to production?",
				Schema: json.RawMessage(`{"type":"boolean"}`)})
			if err != nil {
				return "", err
			}
			if string(ok) != "true" {
				return "not deployed: the user said no", nil
			}
			return "deployed (key " + tool.Info(ctx).IdempotencyKey + ")", nil
		})

	info := tool.CallInfo{ToolCallID: "call-1", IdempotencyKey: "run-1/call-1"}
	_, err := deploy.Call(tool.WithCall(context.Background(), info, nil, nil), nil)
	fmt.Println(err)

	answers := map[string]json.RawMessage{"confirm": json.RawMessage(`true`)}
	res, _ := deploy.Call(tool.WithCall(context.Background(), info, answers, nil), nil)
	fmt.Println(res.Output)
	// Output:
	// tool needs host input "confirm": Deploy to production?
	// deployed (key run-1/call-1)
}
