//go:build race

package bench_test

// raceBuild is set when the tests run with -race, which makes the embedded
// server several times slower; load tests scale down under it.
const raceBuild = true
