package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/keelrun/keel/crypt"
)

// Encryption at rest: every keel command takes the same key file, so a
// worker encrypts what it writes and a reader decrypts what it reads.
const (
	envEncryptionKeyFile = "KEEL_ENCRYPTION_KEY_FILE"
	// envAllowPlaintext lets a worker decode payloads that are not
	// encrypted, while a deployment switches encryption on.
	envAllowPlaintext = "KEEL_ENCRYPTION_ALLOW_PLAINTEXT"
	// envCodecToken is the bearer token of a codec endpoint that requires
	// one: keel dev requires it when set, readers send it.
	envCodecToken = "KEEL_CODEC_TOKEN"
)

// registerKeyFile adds --encryption-key-file to fs.
func registerKeyFile(fs *flagSet, path *string) {
	fs.StringVar(path, "encryption-key-file", os.Getenv(envEncryptionKeyFile),
		"`FILE` of encryption keys, one \"KEYID BASE64KEY\" a line, the first current: payloads are encrypted with AES-256-GCM (default $"+envEncryptionKeyFile+")")
}

// registerAllowPlaintext adds --encryption-allow-plaintext to fs, for the
// commands that decode what workers act on (keel worker, keel dev, keel
// codec).
func registerAllowPlaintext(fs *flagSet, allow *bool) {
	def, _ := strconv.ParseBool(os.Getenv(envAllowPlaintext))
	fs.BoolVar(allow, "encryption-allow-plaintext", def,
		"with --encryption-key-file, also accept payloads that are not encrypted, while histories and store objects "+
			"written before encryption was switched on are in use (default $"+envAllowPlaintext+"); without it they are refused")
}

// loadEncryption returns the codec over the keys in path, nil without a
// path. Its errors name the file and line, never a key. Unless
// allowPlaintext, its Decode refuses payloads that are not encrypted
// (crypt.ErrPlaintext).
func loadEncryption(path string, allowPlaintext bool) (*crypt.Codec, *crypt.Keyring, error) {
	if path == "" {
		return nil, nil, nil
	}
	keys, err := crypt.LoadKeyFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("encryption keys: %w", err)
	}
	var opts []crypt.Option
	if allowPlaintext {
		opts = append(opts, crypt.AllowPlaintext())
	}
	return crypt.NewCodec(keys, opts...), keys, nil
}

// encryptionNote says what a banner shows about encryption.
func encryptionNote(keys *crypt.Keyring) string {
	if keys == nil {
		return "off (--encryption-key-file)"
	}
	return fmt.Sprintf("AES-256-GCM, current key %q of %d", keys.Current(), len(keys.IDs()))
}

// withCodecToken adds $KEEL_CODEC_TOKEN, if set, to requests to a codec
// endpoint.
func withCodecToken(r *http.Request) error {
	if tok := os.Getenv(envCodecToken); tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return nil
}

// devCryptFlags are keel dev's encryption flags.
type devCryptFlags struct {
	keyFile        string
	allowPlaintext bool
	codecToken     string
}

func (c *devCryptFlags) register(fs *flagSet) {
	registerKeyFile(fs, &c.keyFile)
	registerAllowPlaintext(fs, &c.allowPlaintext)
	fs.StringVar(&c.codecToken, "codec-token", os.Getenv(envCodecToken),
		"bearer `TOKEN` the codec endpoint requires (\"Authorization: Bearer TOKEN\"); the embedded Web UI sends none, so it then shows payloads undecoded (default $"+envCodecToken+")")
}

// keyFileFlag is the --encryption-key-file flag that passes path on to
// another command, empty without a path or when the environment already
// names it.
func keyFileFlag(path string) string {
	if path == "" || os.Getenv(envEncryptionKeyFile) == path {
		return ""
	}
	return " --encryption-key-file " + path
}

// decryptsNote adds to the codec endpoint's line of keel dev's banner
// that it decrypts, when it does.
func decryptsNote(keys *crypt.Keyring) string {
	if keys == nil {
		return ""
	}
	return " and decrypts"
}
