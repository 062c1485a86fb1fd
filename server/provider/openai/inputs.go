package openai

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
)

// CheckInputs implements provider.InputChecker. With Config.Inputs set,
// every model reads exactly those kinds. Otherwise, on OpenAI's own API,
// the models that read images read PDFs too (readsFiles); on any other
// server keel cannot tell what a model reads, so it reads none until the
// operator declares its inputs.
func (p *Provider) CheckInputs(model string, kinds []keel.AttachmentKind) error {
	for _, k := range kinds {
		switch {
		case p.cfg.Inputs != nil:
			if !slices.Contains(p.cfg.Inputs, k) {
				return keel.Errorf(keel.CodeInvalidInput, "attachments: %.64s reads no %s", model, provider.KindNoun(k))
			}
		case !p.openAI:
			return keel.Errorf(keel.CodeInvalidInput, "attachments: keel cannot tell whether %.64s on this "+
				"OpenAI-compatible server reads %s; the operator declares what it reads with inputs "+
				"on the model in keel.yaml", model, provider.KindNoun(k))
		case !provider.KnownKind(k) || !readsFiles(model):
			return keel.Errorf(keel.CodeInvalidInput, "attachments: %.64s reads no %s", model, provider.KindNoun(k))
		}
	}
	return nil
}

// readsFiles says whether an OpenAI model reads images and PDFs: the
// gpt-4o, gpt-4.1, gpt-4.5 and gpt-5 families, chatgpt-4o, o1, o3 and
// o4-mini do (fine-tuned ones too); gpt-3.5, gpt-4, o1-mini, o1-preview
// and o3-mini, among others, do not.
func readsFiles(model string) bool {
	m := strings.ToLower(strings.TrimPrefix(model, "ft:"))
	for _, f := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o4-mini"} {
		if strings.HasPrefix(m, f) {
			return true
		}
	}
	for _, f := range []string{"o1", "o3"} {
		if rest, ok := strings.CutPrefix(m, f); ok && (rest == "" || rest[0] == '-' || rest[0] == ':') &&
			!strings.HasPrefix(rest, "-mini") && !strings.HasPrefix(rest, "-preview") {
			return true
		}
	}
	return false
}

// dataURL is the kind of attachment j of message i and its bytes as a
// data URL. An attachment without its bytes (the worker reads them in
// before the request) is refused, never sent.
func dataURL(i, j int, a keel.Attachment) (keel.AttachmentKind, string, error) {
	kind, ok := keel.AttachmentTypes[a.MediaType]
	switch {
	case !ok:
		return "", "", invalidRequest("message %d: attachment %d is a %.40q, not a kind keel sends", i, j, a.MediaType)
	case len(a.Data) == 0:
		return "", "", invalidRequest("message %d: attachment %d has no content (its bytes were not read)", i, j)
	}
	return kind, "data:" + a.MediaType + ";base64," + base64.StdEncoding.EncodeToString(a.Data), nil
}

// fileName is the name a PDF goes by: its own, ending in .pdf (the
// server reads the type from it), or "document.pdf".
func fileName(a keel.Attachment) string {
	switch {
	case a.Name == "":
		return "document.pdf"
	case strings.HasSuffix(strings.ToLower(a.Name), ".pdf"):
		return a.Name
	}
	return a.Name + ".pdf"
}

// label names an attachment in text.
func label(a keel.Attachment) string {
	switch {
	case a.Name != "":
		return a.Name
	case keel.AttachmentTypes[a.MediaType] == keel.AttachmentDocument:
		return fileName(a)
	}
	return "image"
}

// chatParts appends the content parts of message i's attachments: images
// as image_url parts, PDFs as file parts, both as data URLs.
func chatParts(parts []oai.ChatCompletionContentPartUnionParam, i int, atts []keel.Attachment) ([]oai.ChatCompletionContentPartUnionParam, error) {
	for j, a := range atts {
		kind, url, err := dataURL(i, j, a)
		if err != nil {
			return nil, err
		}
		if kind == keel.AttachmentImage {
			parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: url}))
		} else {
			parts = append(parts, oai.FileContentPart(oai.ChatCompletionContentPartFileFileParam{
				Filename: param.NewOpt(fileName(a)), FileData: param.NewOpt(url)}))
		}
	}
	return parts, nil
}

// chatUserMessage is user message i: its text alone, or its text and
// attachments as content parts.
func chatUserMessage(i int, m keel.Message) (oai.ChatCompletionMessageParamUnion, error) {
	if len(m.Attachments) == 0 {
		return oai.UserMessage(m.Content), nil
	}
	var parts []oai.ChatCompletionContentPartUnionParam
	if m.Content != "" {
		parts = append(parts, oai.TextContentPart(m.Content))
	}
	parts, err := chatParts(parts, i, m.Attachments)
	if err != nil {
		return oai.ChatCompletionMessageParamUnion{}, err
	}
	return oai.UserMessage(parts), nil
}

// chatToolAttachments is the user message that carries the attachments
// of tool results (the messages of in at indexes), which a tool message
// cannot: a line naming each and its call, then the attachments.
func chatToolAttachments(in []keel.Message, indexes []int) (oai.ChatCompletionMessageParamUnion, error) {
	var names []string
	for _, i := range indexes {
		for _, a := range in[i].Attachments {
			names = append(names, label(a)+" ("+in[i].ToolCallID+")")
		}
	}
	parts := []oai.ChatCompletionContentPartUnionParam{
		oai.TextContentPart("Attachments of tool results: " + strings.Join(names, ", ")),
	}
	for _, i := range indexes {
		var err error
		if parts, err = chatParts(parts, i, in[i].Attachments); err != nil {
			return oai.ChatCompletionMessageParamUnion{}, err
		}
	}
	return oai.UserMessage(parts), nil
}

// responsesUserMessage is user message i as an input message: its text
// alone, or its text and attachments as input_text, input_image and
// input_file content.
func responsesUserMessage(i int, m keel.Message) (responses.ResponseInputItemUnionParam, error) {
	if len(m.Attachments) == 0 {
		return responses.ResponseInputItemParamOfMessage(m.Content, responses.EasyInputMessageRoleUser), nil
	}
	var content responses.ResponseInputMessageContentListParam
	if m.Content != "" {
		content = append(content, responses.ResponseInputContentParamOfInputText(m.Content))
	}
	for j, a := range m.Attachments {
		kind, url, err := dataURL(i, j, a)
		if err != nil {
			return responses.ResponseInputItemUnionParam{}, err
		}
		if kind == keel.AttachmentImage {
			content = append(content, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
				ImageURL: param.NewOpt(url), Detail: responses.ResponseInputImageDetailAuto}})
		} else {
			content = append(content, responses.ResponseInputContentUnionParam{OfInputFile: &responses.ResponseInputFileParam{
				Filename: param.NewOpt(fileName(a)), FileData: param.NewOpt(url)}})
		}
	}
	return responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser), nil
}

// responsesToolOutput is the output of tool message i: its text alone,
// or, with attachments, a list of its text and them (a
// function_call_output takes input_text, input_image and input_file).
func responsesToolOutput(i int, m keel.Message) (responses.ResponseInputItemUnionParam, error) {
	if len(m.Attachments) == 0 {
		return responses.ResponseInputItemParamOfFunctionCallOutput(m.Content), nil
	}
	var out responses.ResponseFunctionCallOutputItemListParam
	if m.Content != "" {
		out = append(out, responses.ResponseFunctionCallOutputItemUnionParam{
			OfInputText: &responses.ResponseInputTextContentParam{Text: m.Content}})
	}
	for j, a := range m.Attachments {
		kind, url, err := dataURL(i, j, a)
		if err != nil {
			return responses.ResponseInputItemUnionParam{}, err
		}
		if kind == keel.AttachmentImage {
			out = append(out, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{
				ImageURL: param.NewOpt(url), Detail: responses.ResponseInputImageContentDetailAuto}})
		} else {
			out = append(out, responses.ResponseFunctionCallOutputItemUnionParam{OfInputFile: &responses.ResponseInputFileContentParam{
				Filename: param.NewOpt(fileName(a)), FileData: param.NewOpt(url)}})
		}
	}
	return responses.ResponseInputItemParamOfFunctionCallOutput(out), nil
}

func invalidRequest(format string, args ...any) error {
	return &keel.ProviderError{Provider: Name, Kind: keel.ProviderInvalidRequest, Message: fmt.Sprintf(format, args...)}
}
