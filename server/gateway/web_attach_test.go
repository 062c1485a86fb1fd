package gateway_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel/server/gateway"
)

// The page attaches files: the Attach button's file input uploads each
// image or PDF chosen (POST /v1/attachments) and shows it as a chip
// beside the prompt, with a button to drop it; a file of another type is
// refused on the page, without an upload. Sending the prompt sends the
// chips' references and clears them; once the run has started, the log
// shows the prompt's attachments as chips (kind, name, size), read from
// the session's history, also after the page is loaded again.
func TestWebPageAttachments(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium and starts a Temporal server")
	}
	b := newBrowser(t)
	s, book, _ := attachStack(t, gateway.Options{})
	m := book.Add(t, "web-attach", `{"repeat":true,"turns":[{"text":["A blue pixel and a brief."]}]}`)
	dir := t.TempDir()
	pixel := pixelPNG(t)
	files := map[string][]byte{"pixel.png": pixel, "brief.pdf": testPDF, "notes.txt": []byte("just notes\n")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	chips := func(sel string) string {
		return eval[string](b, `[...document.querySelectorAll(`+strconv.Quote(sel)+`)].map((c) => c.textContent).join(" | ")`)
	}

	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	b.open("web-attach")
	if !eval[bool](b, `document.getElementById("pending").hidden`) {
		t.Fatal("the pending attachments show before any was chosen")
	}

	// A text file is refused on the page.
	b.do("choose a text file", chromedp.SetUploadFiles(chromedp.CSS("#attach"), []string{path("notes.txt")}))
	poll[bool](b, "the refusal", `document.getElementById("error").textContent.includes("notes.txt")`)
	if got := chips("#pending .chip"); got != "" {
		t.Fatalf("a text file became a chip: %q", got)
	}

	// An image and a PDF become chips; one is dropped and chosen again.
	b.do("choose files", chromedp.SetUploadFiles(chromedp.CSS("#attach"), []string{path("pixel.png"), path("brief.pdf")}))
	poll[bool](b, "two chips", `document.querySelectorAll("#pending .chip").length === 2 && !document.getElementById("send").disabled`)
	want := "image" + "pixel.png" + strconv.Itoa(len(pixel)) + " B×" + " | " + "PDF" + "brief.pdf" + strconv.Itoa(len(testPDF)) + " B×"
	if got := chips("#pending .chip"); got != want {
		t.Errorf("pending chips %q, want %q", got, want)
	}
	if !eval[bool](b, `document.getElementById("error").hidden`) {
		t.Errorf("the text file's refusal still shows after good uploads")
	}
	b.screenshot("pending")
	b.do("drop the PDF", chromedp.Click(chromedp.CSS(`#pending .chip[data-kind="document"] button`)))
	poll[bool](b, "one chip", `document.querySelectorAll("#pending .chip").length === 1`)
	b.do("choose the PDF again", chromedp.SetUploadFiles(chromedp.CSS("#attach"), []string{path("brief.pdf")}))
	poll[bool](b, "two chips again", `document.querySelectorAll("#pending .chip").length === 2 && !document.getElementById("send").disabled`)

	b.send("What are these?", m, "")
	b.do("run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"] .bubble`)))
	poll[bool](b, "the pending chips cleared", `document.getElementById("pending").hidden && !document.querySelector("#pending .chip")`)
	logChips := `.run-start .attachments .chip`
	poll[bool](b, "the prompt's attachments in the log", `document.querySelectorAll(`+strconv.Quote(logChips)+`).length === 2`)
	if got, want := chips(logChips), "image"+"pixel.png"+strconv.Itoa(len(pixel))+" B | PDF"+"brief.pdf"+strconv.Itoa(len(testPDF))+" B"; got != want {
		t.Errorf("the log's chips %q, want %q", got, want)
	}
	b.screenshot("sent")

	// A second prompt without attachments shows none; a reload shows the
	// first prompt's again.
	b.send("And now?", m, "")
	poll[bool](b, "the second run", `document.querySelectorAll('[data-type="run.completed"]').length === 2`)
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	b.open("web-attach")
	poll[bool](b, "the chips after a reload", `document.querySelectorAll(".run-start").length === 2 && document.querySelectorAll(`+strconv.Quote(logChips)+`).length === 2`)
	if n := eval[int](b, `document.querySelectorAll(".run-start")[1].querySelectorAll(".chip").length`); n != 0 {
		t.Errorf("the second prompt shows %d attachments, want none", n)
	}
}
