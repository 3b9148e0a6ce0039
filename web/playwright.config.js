// Browser tests of the dashboard. They need a running hookwheel: the Go test
// TestDashboardInBrowser (cmd/hookwheel/internal/e2e) starts one with its own
// database and receivers, then runs `npx playwright test` with HOOKWHEEL_URL
// and the credentials set. Chromium is Debian's (/usr/bin/chromium): no
// browser is downloaded.
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: './tests',
  timeout: 90_000,
  expect: { timeout: 15_000 },
  workers: 1,
  reporter: [['list']],
  outputDir: 'test-results',
  use: {
    baseURL: process.env.HOOKWHEEL_URL,
    viewport: { width: 1280, height: 860 },
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    },
    trace: 'off',
    screenshot: 'only-on-failure',
  },
});
