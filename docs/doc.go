// Package docs holds no code. It exists for its test: every relative link in
// the repository's Markdown files (the README, ARCHITECTURE.md, the guides in
// this directory, the SDKs' and the benchmarks' pages) must name a file that
// exists and, when it names a heading, a heading that exists, so that a page
// renamed or a section retitled cannot leave a reader in front of a 404.
package docs
