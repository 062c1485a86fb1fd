package clienttest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/clienttest"
)

// Summarize is the code under test: it asks a session for a summary and
// returns the run's final text.
func Summarize(ctx context.Context, c *client.Client, doc string) (string, error) {
	run, err := c.Session("summaries").Send(ctx, "Summarize in one line:\n"+doc)
	if err != nil {
		return "", err
	}
	out, err := run.Outcome(ctx)
	if err != nil {
		return "", fmt.Errorf("summary: %w", err)
	}
	return out.Text, nil
}

// A test of Summarize without a server: the fake's runs answer what the
// Responder says, and the test checks what was sent.
func Example() {
	fake := clienttest.New(func(p clienttest.Prompt) clienttest.Reply {
		if strings.Contains(p.Text, "error") {
			return clienttest.Reply{Err: &keel.Error{Code: keel.CodeProvider, Message: "the provider is down"}}
		}
		return clienttest.Reply{Text: "A one-line summary."}
	})
	c := fake.Client()
	defer c.Close()
	ctx := context.Background()

	text, err := Summarize(ctx, c, "A long document.")
	fmt.Printf("%q %v\n", text, err)
	_, err = Summarize(ctx, c, "A document that makes an error.")
	fmt.Println(err, errors.Is(err, keel.ErrProvider))
	fmt.Println(len(fake.Prompts()), "prompts; the first:", strings.SplitN(fake.Prompts()[0].Text, "\n", 2)[0])
	// Output:
	// "A one-line summary." <nil>
	// summary: keel: the provider is down true
	// 2 prompts; the first: Summarize in one line:
}
