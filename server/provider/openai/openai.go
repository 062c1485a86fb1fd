package openai

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"os"
	"slices"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// Name is the provider's name in model specs ("openai:MODEL") and errors.
const Name = "openai"

// DefaultBaseURL is OpenAI's own API.
const DefaultBaseURL = "https://api.openai.com/v1"

// The environment variables FromEnv reads.
const (
	EnvBaseURL = "OPENAI_BASE_URL"
	EnvAPIKey  = "OPENAI_API_KEY"
)

// The APIs of Config.API.
const (
	// APIChat is Chat Completions, which OpenAI and every
	// OpenAI-compatible server speak.
	APIChat = "chat"
	// APIResponses is OpenAI's Responses API.
	APIResponses = "responses"
)

// The hosted tools of Config.HostedTools: tools that OpenAI runs itself.
const (
	HostedWebSearch       = "web_search"
	HostedFileSearch      = "file_search"
	HostedCodeInterpreter = "code_interpreter"
)

// Errors from New.
var (
	ErrNoAPIKey        = errors.New("openai: no API key (set " + EnvAPIKey + "; only local servers may go without)")
	ErrBadBaseURL      = errors.New("openai: base URL must be an absolute http or https URL")
	ErrBadCacheKeyMode = errors.New("openai: prompt cache key mode must be empty (auto), " +
		string(CacheKeyOn) + " or " + string(CacheKeyOff))
	ErrBadAPI        = errors.New("openai: API must be empty (chat), " + APIChat + " or " + APIResponses)
	ErrBadHostedTool = errors.New("openai: hosted tools are " + HostedWebSearch + ", " +
		HostedFileSearch + " and " + HostedCodeInterpreter)
	ErrHostedToolsNeedResponses = errors.New("openai: hosted tools need the Responses API (API: " + APIResponses + ")")
	ErrNoVectorStores           = errors.New("openai: " + HostedFileSearch + " needs VectorStoreIDs")
	ErrBadInputs                = errors.New("openai: inputs are " + string(keel.AttachmentImage) + " and " +
		string(keel.AttachmentDocument))
)

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root that "chat/completions" (or "responses") is
	// appended to.
	// Optional; default: DefaultBaseURL. Ollama serves
	// http://localhost:11434/v1, vLLM http://localhost:8000/v1, the llama.cpp
	// server http://localhost:8080/v1.
	BaseURL string
	// APIKey is sent as a bearer token in the Authorization header and
	// nowhere else. Optional only when BaseURL names a local or
	// private-network host (loopback, a private IP, localhost, *.local,
	// *.internal, or a single-label name such as a compose service).
	APIKey string
	// MaxTokens caps a response when the request itself sets no cap.
	// Optional; default: 0, the server's own limit.
	MaxTokens int
	// LegacyMaxTokens sends the cap as "max_tokens" instead of
	// "max_completion_tokens", for servers that only know the older field.
	// Optional; default: false.
	LegacyMaxTokens bool
	// PromptCacheKey says when requests carry a prompt_cache_key, the same
	// for every request of a conversation, which helps the server find the
	// conversation's cached prefix: CacheKeyAuto (only to api.openai.com),
	// CacheKeyOn (any server; for compatible servers that take the field)
	// or CacheKeyOff. Optional; default: CacheKeyAuto.
	PromptCacheKey CacheKeyMode
	// API is the API requests go to: APIChat, or APIResponses, which
	// carries OpenAI's reasoning from turn to turn (as encrypted reasoning
	// items kept in the transcript; nothing is stored on the server) and
	// runs hosted tools. Optional; default: APIChat.
	API string
	// HostedTools names the hosted tools the model may use:
	// HostedWebSearch, HostedFileSearch (searching VectorStoreIDs) and
	// HostedCodeInterpreter (in a container OpenAI creates). Responses API
	// only. Optional; default: none.
	HostedTools []string
	// VectorStoreIDs are the vector stores HostedFileSearch searches;
	// required with it, unused without it.
	VectorStoreIDs []string
	// Reasoning is what a request that asks for no reasoning of its own
	// gets: an effort (a budget is refused). Optional; default: the
	// server's.
	Reasoning keel.Reasoning
	// Inputs are the attachment kinds (keel.AttachmentImage,
	// keel.AttachmentDocument) that every model reads: what a model of a
	// server other than OpenAI's own reads, which keel cannot tell.
	// Optional; default (nil): on OpenAI's API by model, as CheckInputs
	// says, elsewhere none. An empty, non-nil list reads none.
	Inputs []keel.AttachmentKind
	// HTTPClient makes the requests. Optional; default: a client without an
	// overall timeout, since the request's context bounds it.
	HTTPClient *http.Client
}

// FromEnv returns a Config from OPENAI_BASE_URL and OPENAI_API_KEY.
func FromEnv() Config {
	return Config{BaseURL: os.Getenv(EnvBaseURL), APIKey: os.Getenv(EnvAPIKey)}
}

// Provider streams responses from an OpenAI-compatible server, over Chat
// Completions or the Responses API.
type Provider struct {
	cfg       Config
	chat      oai.ChatCompletionService
	responses responses.ResponseService
	// hosted are the hosted tools of every Responses request; sources
	// says web search is one, whose sources are asked for.
	hosted  []responses.ToolUnionParam
	sources bool
	// cacheKey says whether requests carry a prompt_cache_key.
	cacheKey bool
	// openAI says the base URL is OpenAI's own API.
	openAI bool
}

var (
	_ provider.Provider         = (*Provider)(nil)
	_ provider.ReasoningChecker = (*Provider)(nil)
	_ provider.InputChecker     = (*Provider)(nil)
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
	switch cfg.PromptCacheKey {
	case CacheKeyAuto, CacheKeyOn, CacheKeyOff:
	default:
		return nil, ErrBadCacheKeyMode
	}
	switch cfg.API {
	case "":
		cfg.API = APIChat
	case APIChat, APIResponses:
	default:
		return nil, ErrBadAPI
	}
	if len(cfg.HostedTools) > 0 && cfg.API != APIResponses {
		return nil, ErrHostedToolsNeedResponses
	}
	hosted, err := hostedTools(cfg.HostedTools, cfg.VectorStoreIDs)
	if err != nil {
		return nil, err
	}
	if err := cfg.Reasoning.Validate(); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if cfg.Reasoning.BudgetTokens != 0 {
		return nil, errors.New("openai: " + noBudget)
	}
	if err := provider.CheckKinds(cfg.Inputs, ErrBadInputs); err != nil {
		return nil, err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	// The services are built from explicit options only, so ambient
	// OPENAI_* variables (an admin key, custom headers) never leak into
	// requests.
	opts := []option.RequestOption{
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
	}
	return &Provider{cfg: cfg, chat: oai.NewChatCompletionService(opts...),
		responses: responses.NewResponseService(opts...),
		hosted:    hosted, sources: slices.Contains(cfg.HostedTools, HostedWebSearch),
		cacheKey: sendsCacheKey(cfg.PromptCacheKey, cfg.BaseURL), openAI: isOpenAI(cfg.BaseURL)}, nil
}

// Name returns "openai".
func (p *Provider) Name() string { return Name }

// CheckReasoning says whether the model takes r: OpenAI takes an effort,
// on both APIs, and no token budget.
func (p *Provider) CheckReasoning(model string, r keel.Reasoning) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.BudgetTokens != 0 {
		return keel.Errorf(keel.CodeInvalidInput, "%s", noBudget)
	}
	return nil
}

// Stream sends req as one streaming request to the configured API and
// yields its chunks. Failures are yielded once, last: a
// *keel.ProviderError, a *provider.MalformedError for an event that is not
// valid JSON, or the context's error when ctx ends.
func (p *Provider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	// Whatever the server echoes, its text never carries the key.
	return provider.WithoutSecret(func(yield func(provider.Chunk, error) bool) {
		if p.cfg.API == APIResponses {
			p.streamResponses(ctx, req, yield)
		} else {
			p.streamChat(ctx, req, yield)
		}
	}, p.cfg.APIKey)
}

// streamChat streams req as one Chat Completions request.
func (p *Provider) streamChat(ctx context.Context, req provider.Request, yield func(provider.Chunk, error) bool) {
	params, err := p.params(req)
	if err != nil {
		yield(provider.Chunk{}, err)
		return
	}
	var failed failedResponse
	var res *http.Response
	_, err = p.chat.New(ctx, params,
		option.WithJSONSet("stream", true),
		option.WithResponseBodyInto(&res),
		option.WithMiddleware(failed.capture),
	)
	if err != nil {
		yield(provider.Chunk{}, failure(ctx, err, &failed))
		return
	}
	if res == nil || res.Body == nil {
		yield(provider.Chunk{}, &keel.ProviderError{Provider: Name, Kind: keel.ProviderServer,
			Retryable: true, Message: "empty response"})
		return
	}
	defer res.Body.Close()
	readStream(ctx, res, yield)
}

// reasoning is req's reasoning setting, or the Config's when it has none.
func (p *Provider) reasoning(req provider.Request) keel.Reasoning {
	if req.Reasoning.IsZero() {
		return p.cfg.Reasoning
	}
	return req.Reasoning
}
