package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// Name is the provider's name in model specs ("anthropic:MODEL") and errors.
const Name = "anthropic"

// DefaultBaseURL is Anthropic's API; "v1/messages" is appended to it.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens caps a response when neither the request nor the Config
// does; the Messages API requires a cap.
const DefaultMaxTokens = 4096

// The environment variables FromEnv reads.
const (
	EnvBaseURL = "ANTHROPIC_BASE_URL"
	EnvAPIKey  = "ANTHROPIC_API_KEY"
)

// Errors from New.
var (
	ErrNoAPIKey    = errors.New("anthropic: no API key (set " + EnvAPIKey + ")")
	ErrBadBaseURL  = errors.New("anthropic: base URL must be an absolute http or https URL")
	ErrBadCacheTTL = errors.New("anthropic: cache TTL must be " + CacheTTL5m + " or " + CacheTTL1h)
	ErrHostedTool  = errors.New("anthropic: hosted tools are " + HostedWebSearch + " and " + HostedCodeExecution)
	ErrBadInputs   = errors.New("anthropic: inputs are " + string(keel.AttachmentImage) + " and " + string(keel.AttachmentDocument))
)

// The hosted tools (server tools) a Config may enable.
const (
	HostedWebSearch     = "web_search"
	HostedCodeExecution = "code_execution"
)

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root that "v1/messages" is appended to.
	// Optional; default: DefaultBaseURL.
	BaseURL string
	// APIKey is sent in the x-api-key header and nowhere else. Required,
	// except for a local or private-network BaseURL (a proxy that holds the
	// key itself).
	APIKey string
	// MaxTokens caps a response when the request sets no cap.
	// Optional; default: DefaultMaxTokens.
	MaxTokens int
	// DisableCache sends no cache_control breakpoints, so nothing of the
	// prompt is cached. Optional; default: false, the stable prefix of
	// every request (tools, system prompt, the conversation so far) is
	// marked for caching.
	DisableCache bool
	// Reasoning is what a request that asks for no reasoning of its own
	// gets: an effort (minimal 1,024 thinking tokens, low 4,096, medium
	// 12,288, high 24,576) or a budget of extended thinking. max_tokens
	// then counts the budget on top of the answer's cap. Optional;
	// default: no thinking.
	Reasoning keel.Reasoning
	// HostedTools names the server tools the model may use: HostedWebSearch
	// and HostedCodeExecution. Their uses are reported as
	// keel.HostedToolActivity. Optional.
	HostedTools []string
	// CacheTTL is how long a cached prefix lives: CacheTTL5m or CacheTTL1h
	// (whose cache writes cost more). Optional; default: the API's own, 5
	// minutes.
	CacheTTL string
	// Inputs are the attachment kinds (keel.AttachmentImage,
	// keel.AttachmentDocument) that every model reads, for a proxy whose
	// models the names do not tell. Optional; default (nil): by model, as
	// CheckInputs says. An empty, non-nil list reads none.
	Inputs []keel.AttachmentKind
	// HTTPClient makes the requests. Optional; default: a client without an
	// overall timeout, since the request's context bounds it.
	HTTPClient *http.Client
}

// FromEnv returns a Config from ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY.
func FromEnv() Config {
	return Config{BaseURL: os.Getenv(EnvBaseURL), APIKey: os.Getenv(EnvAPIKey)}
}

// Provider streams responses from the Anthropic Messages API.
type Provider struct {
	cfg      Config
	messages sdk.MessageService
	hosted   []sdk.ToolUnionParam
}

var (
	_ provider.Provider     = (*Provider)(nil)
	_ provider.InputChecker = (*Provider)(nil)
)

// New returns a Provider for cfg. The SDK's own retries are off: the Run
// workflow owns retrying, so each Stream makes exactly one HTTP request.
func New(cfg Config) (*Provider, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if err := provider.CheckEndpoint(cfg.BaseURL, cfg.APIKey, ErrBadBaseURL, ErrNoAPIKey); err != nil {
		return nil, err
	}
	if cfg.CacheTTL != "" && cfg.CacheTTL != CacheTTL5m && cfg.CacheTTL != CacheTTL1h {
		return nil, ErrBadCacheTTL
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if err := cfg.Reasoning.Validate(); err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	if err := provider.CheckKinds(cfg.Inputs, ErrBadInputs); err != nil {
		return nil, err
	}
	var hosted []sdk.ToolUnionParam
	for _, h := range cfg.HostedTools {
		switch h {
		case HostedWebSearch:
			hosted = append(hosted, sdk.ToolUnionParam{OfWebSearchTool20250305: &sdk.WebSearchTool20250305Param{}})
		case HostedCodeExecution:
			hosted = append(hosted, sdk.ToolUnionParam{OfCodeExecutionTool20250522: &sdk.CodeExecutionTool20250522Param{}})
		default:
			return nil, fmt.Errorf("%w, not %.40q", ErrHostedTool, h)
		}
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithBaseURL(cfg.BaseURL),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// Built from explicit options only: the SDK's client constructor would
	// also pick up ambient credentials (auth tokens, profiles) from the
	// environment and files.
	return &Provider{cfg: cfg, messages: sdk.NewMessageService(opts...), hosted: hosted}, nil
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// Stream sends req as one streaming Messages request and yields its chunks.
// Failures are yielded once, last: a *keel.ProviderError (also for error
// events inside the stream, such as overloaded_error), a
// *provider.MalformedError, or the context's error when ctx ends.
func (p *Provider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	// Whatever the server echoes, its text never carries the key.
	return provider.WithoutSecret(func(yield func(provider.Chunk, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(provider.Chunk{}, err)
			return
		}
		var res *http.Response
		stream := p.messages.NewStreaming(ctx, params, option.WithResponseInto(&res))
		defer stream.Close()
		st := streamState{yield: yield, answerTool: provider.AnswerSchema(req.OutputSchema) != nil}
		for stream.Next() {
			if !st.handle(stream.Current()) {
				return
			}
		}
		if err := ctx.Err(); err != nil {
			yield(provider.Chunk{}, err)
			return
		}
		if err := stream.Err(); err != nil {
			var apiErr *sdk.Error
			if st.finished && !errors.As(err, &apiErr) {
				return // the answer is complete; only the stream's tail was lost
			}
			yield(provider.Chunk{}, failure(err, res))
			return
		}
		// A stop reason means the answer is complete even if message_stop
		// never came; without either the answer was cut off.
		if !st.stopped && !st.finished {
			yield(provider.Chunk{}, provider.Failure(Name,
				fmt.Errorf("%w: connection closed before message_stop", provider.ErrStreamCut)))
		}
	}, p.cfg.APIKey)
}
