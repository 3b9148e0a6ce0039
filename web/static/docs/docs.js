// The API reference at /docs: Redoc renders the OpenAPI document this server
// serves, so the page always describes the running version.
/* global Redoc */

const el = document.getElementById('redoc');
// The header bar above Redoc is sticky, 48px high: Redoc scrolls its
// anchors that much lower so a heading is not hidden under it.
const headerHeight = 48;

Redoc.init('/openapi.yaml', {
  scrollYOffset: headerHeight,
  expandResponses: '200,201',
  requiredPropsFirst: true,
  jsonSampleExpandLevel: 3,
  hideDownloadButton: true,
  nativeScrollbars: true,
  theme: {
    colors: { primary: { main: '#4f46e5' } },
    typography: {
      fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
      headings: { fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif' },
      code: { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace' },
    },
    sidebar: { width: '280px' },
    rightPanel: { backgroundColor: '#1f2937' },
  },
}, el, (err) => {
  if (err) {
    // Said in the console too, where the browser tests look.
    console.error(err);
    el.replaceChildren(Object.assign(document.createElement('p'), {
      className: 'failed',
      textContent: `The API reference could not be drawn: ${err.message || err}. The document itself is at /openapi.yaml.`,
    }));
  }
});
