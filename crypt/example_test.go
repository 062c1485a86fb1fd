package crypt_test

import (
	"fmt"

	"go.temporal.io/sdk/converter"

	"github.com/keelrun/keel/crypt"
)

func Example() {
	// One line a key, the first current. A real file lives outside the
	// repository, readable by keel's processes only.
	keys, err := crypt.ParseKeyFile("keys", []byte(
		"2026-12 "+b64(32, 'n')+"\n"+
			"2026-06 "+b64(32, 'o')+"\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	dc := crypt.NewDataConverter(crypt.NewCodec(keys))
	p, err := dc.ToPayload("a prompt")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(p.Metadata[converter.MetadataEncoding]), crypt.KeyID(p))
	var back string
	if err := dc.FromPayload(p, &back); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back)
	// Output:
	// binary/encrypted 2026-12
	// a prompt
}
