// A Server-Sent Events parser (the WHATWG rules keel's gateway writes to:
// fields id, event, data, retry; comments; LF, CRLF or CR line ends).

/**
 * @typedef {{id?: string, event: string, data: string}} SSEMessage
 * A dispatched message: `id` only when the message carried an id field.
 */

/**
 * parseSSE reads a byte stream and yields its messages; `onRetry` gets a
 * `retry:` field's milliseconds.
 * @param {AsyncIterable<Uint8Array>} body
 * @param {(ms: number) => void} [onRetry]
 * @returns {AsyncGenerator<SSEMessage>}
 */
export async function* parseSSE(body, onRetry) {
  const decoder = new TextDecoder();
  let buf = "";
  /** @type {{id?: string, event: string, data: string[]}} */
  let msg = { event: "", data: [] };
  let sawCR = false;
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let i = 0; i < buf.length; i++) {
      const c = buf[i];
      if (c !== "\n" && c !== "\r") continue;
      // A LF right after a CR ends nothing: CRLF is one line end, also
      // when it straddles two chunks.
      if (c === "\n" && sawCR && i === start) { sawCR = false; start = i + 1; continue; }
      sawCR = c === "\r";
      const line = buf.slice(start, i);
      start = i + 1;
      if (line === "") {
        if (msg.data.length > 0) {
          yield { ...(msg.id !== undefined ? { id: msg.id } : {}), event: msg.event || "message", data: msg.data.join("\n") };
        }
        msg = { event: "", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      switch (field) {
        case "id": if (!value.includes("\0")) msg.id = value; break;
        case "event": msg.event = value; break;
        case "data": msg.data.push(value); break;
        case "retry": if (/^\d+$/.test(value) && onRetry) onRetry(Number(value)); break;
      }
    }
    buf = buf.slice(start);
    if (sawCR && buf.length > 0) sawCR = false;
  }
}
