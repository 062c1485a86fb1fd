//go:build !race

package bench_test

const raceBuild = false
