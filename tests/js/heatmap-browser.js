#!/usr/bin/env node
// heatmap-browser.js DIR SPEC_JSON [SCREENSHOT] — opens the source heat map
// of `strata annotate -f html -o DIR` in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core) from file://, acts on it
// the way a person would, and prints what it saw as JSON for
// tests/func/test_diff.py. SPEC: {file: the end of a source path, lines:
// [line numbers], func: a function name}.
//
//   console   every console error/warning and uncaught page error
//   requests  every request outside DIR (must be none: it works offline)
//   summary, files, funcs   the header text and the side lists' texts
//   shades    the background drawn behind each of SPEC.lines of SPEC.file
//   filtered  the functions still shown after typing SPEC.func in the filter
//   panel     after clicking SPEC.func in the Functions list: its panel's
//             text, its callers' and callees' link texts, the state
//   caller    after clicking its first caller: the same, and the state
//             (which file is shown, which line is marked)
//   back      the state after the browser's Back
//
// Exit status 0 when the page was driven, 2 when Chromium cannot start.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.STRATA_CHROMIUM || '/usr/bin/chromium';

async function main() {
	const [dir, specJson, shot] = process.argv.slice(2);
	const spec = JSON.parse(specJson);
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
		console.error('heatmap-browser: cannot start Chromium (' + CHROMIUM + '): ' + e.message.split('\n')[0]);
		fs.rmSync(profileDir, { recursive: true, force: true });
		process.exit(2);
	}
	const out = { console: [], requests: [] };
	const root = 'file://' + path.resolve(dir) + '/';
	try {
		const page = ctx.pages()[0] || (await ctx.newPage());
		page.on('console', (m) => {
			if (m.type() === 'error' || m.type() === 'warning') out.console.push(m.type() + ': ' + m.text());
		});
		page.on('pageerror', (e) => out.console.push('pageerror: ' + e.message));
		await ctx.route('**/*', (route) => {
			const u = route.request().url();
			if (u.startsWith(root)) return route.continue();
			out.requests.push(u);
			return route.abort();
		});
		await page.goto(root + 'index.html', { waitUntil: 'load' });
		await run(page, out, spec);
		if (shot) await page.screenshot({ path: shot, fullPage: false });
	} finally {
		await ctx.close();
		fs.rmSync(profileDir, { recursive: true, force: true });
	}
	process.stdout.write(JSON.stringify(out));
}

const state = (page) => page.evaluate(() => window.strataHeatmap.state());
const rendered = (page) => page.waitForFunction(() => window.strataHeatmap.state().rendered, null, { timeout: 10000 });
// After a click: the page routes on `hashchange`, which comes after the
// click returns, so `rendered` alone can still describe the view before
// it (a race a loaded machine loses). Waits for the view asked for.
const renderedFile = (page, end) => page.waitForFunction(
	(e) => { const s = window.strataHeatmap.state(); return s.rendered && !!s.file && s.file.endsWith(e); },
	end, { timeout: 10000 });
const renderedFunc = (page, test) => page.waitForFunction(
	([name, not]) => {
		const s = window.strataHeatmap.state();
		return s.rendered && !!s.func && (not ? s.func !== name : s.func === name);
	}, test, { timeout: 10000 });

async function panel(page) {
	return {
		text: await page.textContent('#func'),
		callers: await page.$$eval('#func ul.callers a', (as) => as.map((a) => a.textContent)),
		callees: await page.$$eval('#func ul.callees a', (as) => as.map((a) => a.textContent)),
		state: await state(page),
	};
}

async function run(page, out, spec) {
	await rendered(page);
	out.initial = await state(page);
	out.summary = await page.textContent('#summary');
	out.files = await page.$$eval('#files li a', (as) => as.map((a) => a.textContent));
	out.funcs = await page.$$eval('#funcs li a', (as) => as.map((a) => a.textContent));
	// The file, from the side list as a person would pick it.
	const fileItem = page.locator('#files li a').filter({ hasText: spec.file }).first();
	await fileItem.click();
	await renderedFile(page, spec.file);
	out.fileState = await state(page);
	out.shades = {};
	for (const ln of spec.lines) out.shades[ln] = await page.evaluate((l) => window.strataHeatmap.shade(l), ln);
	out.calls = await page.$$eval('#code .call a', (as) => as.map((a) => a.textContent));
	// A function from the Functions list (after filtering it by name),
	// then its first caller.
	await page.click('#tab-funcs');
	await page.fill('#filter', spec.func);
	out.filtered = await page.$$eval('#funcs li', (ls) => ls.filter((l) => l.offsetParent !== null)
		.map((l) => l.firstChild.textContent));
	await page.fill('#filter', '');
	await page.locator('#funcs li a').filter({ hasText: new RegExp('^' + spec.func + '( |$)') }).first().click();
	await renderedFunc(page, [spec.func, false]);
	out.panel = await panel(page);
	const first = page.locator('#func ul.callers a').first();
	if (await first.count()) {
		await first.click();
		await renderedFunc(page, [spec.func, true]);
		out.caller = await panel(page);
		out.caller.target = await page.evaluate(() => {
			const tr = document.querySelector('#code tr.target');
			return tr ? tr.id : null;
		});
		await page.goBack();
		await renderedFunc(page, [spec.func, false]);
		out.back = await state(page);
	}
}

main().catch((e) => {
	console.error('heatmap-browser: ' + (e.stack || e.message));
	process.exit(1);
});
