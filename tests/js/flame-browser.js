#!/usr/bin/env node
// flame-browser.js html|svg FILE [TERMS_JSON] [SCREENSHOT] — opens a strata
// flame graph in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core; no browser is downloaded) and acts on it the way a person
// would, printing what it saw as JSON for tests/func/test_export_web.py:
//
//   console   every console error/warning and uncaught page error
//   requests  every request other than the file itself (must be none)
//   html:     initial state, drawn labels, thread selector options and the
//             total of each, per search term the "Matched" text and state,
//             and for the first term: the hover tooltip, the click (zoom)
//             state and box, and the state after Back
//   svg:      number of frames drawn and the <title> texts
//
// Exit status 0 when the page was driven, 2 when Chromium cannot start.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.STRATA_CHROMIUM || '/usr/bin/chromium';

async function main() {
	const [mode, file, termsJson, shot] = process.argv.slice(2);
	const terms = termsJson ? JSON.parse(termsJson) : [];
	const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-chromium-'));
	let ctx;
	try {
		ctx = await chromium.launchPersistentContext(profileDir, {
			executablePath: CHROMIUM,
			headless: true,
			viewport: { width: 1280, height: 900 },
			args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
				'--disable-component-update', '--no-first-run'],
		});
	} catch (e) {
		console.error('flame-browser: cannot start Chromium (' + CHROMIUM + '): ' + e.message.split('\n')[0]);
		fs.rmSync(profileDir, { recursive: true, force: true });
		process.exit(2);
	}
	const out = { console: [], requests: [] };
	const url = 'file://' + path.resolve(file);
	try {
		const page = ctx.pages()[0] || (await ctx.newPage());
		page.on('console', (m) => {
			if (m.type() === 'error' || m.type() === 'warning') out.console.push(m.type() + ': ' + m.text());
		});
		page.on('pageerror', (e) => out.console.push('pageerror: ' + e.message));
		await ctx.route('**/*', (route) => {
			const u = route.request().url();
			if (u === url) return route.continue();
			out.requests.push(u);
			return route.abort();
		});
		await page.goto(url, { waitUntil: 'load' });
		if (mode === 'svg') await svg(page, out);
		else await html(page, out, terms);
		if (shot) await page.screenshot({ path: shot, fullPage: false });
	} finally {
		await ctx.close();
		fs.rmSync(profileDir, { recursive: true, force: true });
	}
	process.stdout.write(JSON.stringify(out));
}

async function svg(page, out) {
	out.frames = await page.locator('svg g rect').count();
	out.titles = await page.$$eval('svg g title', (ts) => ts.map((t) => t.textContent));
	out.size = await page.evaluate(() => {
		const r = document.querySelector('svg').getBoundingClientRect();
		return [r.width, r.height];
	});
}

async function html(page, out, terms) {
	const state = () => page.evaluate(() => window.strataFlame.state());
	const find = (t) => page.evaluate((x) => window.strataFlame.find(x), t);
	out.initial = await state();
	out.labels = await page.evaluate(() => window.strataFlame.labels());
	out.canvasWidth = await page.evaluate(() => document.getElementById('flame').getBoundingClientRect().width);
	out.title = await page.textContent('#title');
	out.options = await page.$$eval('#thread option', (os) => os.map((o) => [o.value, o.textContent]));
	out.totals = {};
	for (const [value] of out.options) {
		await page.selectOption('#thread', value);
		out.totals[value] = (await state()).total;
	}
	await page.selectOption('#thread', 'all');
	out.searches = {};
	for (const term of terms) {
		await page.fill('#search', term);
		await page.press('#search', 'Enter');
		out.searches[term] = { text: await page.textContent('#match'), state: await state() };
	}
	await page.fill('#search', '');
	await page.press('#search', 'Enter');
	if (terms.length) {
		const box = await find(terms[0]);
		out.box = box;
		if (box) {
			const x = box.x + Math.min(box.w / 2, 40), y = box.y + box.h / 2;
			await page.mouse.move(x, y);
			out.tooltip = await page.textContent('#tip');
			out.tooltipVisible = await page.isVisible('#tip');
			await page.mouse.click(x, y);
			out.zoomed = await state();
			out.zoomedBox = await find(terms[0]);
			out.crumbs = await page.textContent('#crumbs');
			await page.click('#back');
			out.afterBack = await state();
			out.afterBackBox = await find(terms[0]);
		}
	}
}

main().catch((e) => {
	console.error('flame-browser: ' + (e.stack || e.message));
	process.exit(1);
});
