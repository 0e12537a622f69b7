#!/usr/bin/env node
// flame-browser.js html|diff|svg FILE [TERMS_JSON] [SCREENSHOT] — opens a strata
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
//   diff:     (convert --diff) as html, and per search term both sides of
//             the widest box with that label (window.strataFlame.diff) and
//             the colour actually drawn there, read from the canvas; the
//             same after choosing "Merge lines"
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
		if (mode === 'diff') await diff(page, out, terms);
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
	out.diffByShown = await page.isVisible('#diffby');
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

// The colour drawn at a box: the pixels of its top row, right of where its
// label could be, read back from the canvas.
async function drawn(page, term) {
	return page.evaluate((t) => {
		const b = window.strataFlame.find(t);
		if (!b) return null;
		const c = document.getElementById('flame'), r = c.getBoundingClientRect();
		const ratio = c.width / r.width;
		const x = Math.floor((b.x - window.scrollX - r.left + b.w - 4) * ratio);
		const y = Math.floor((b.y - window.scrollY - r.top + 2) * ratio);
		const d = c.getContext('2d').getImageData(x, y, 1, 1).data;
		return [d[0], d[1], d[2]];
	}, term);
}

async function diff(page, out, terms) {
	out.diff = {};
	out.diffMerged = {};
	for (const term of terms) {
		out.diff[term] = await page.evaluate((t) => window.strataFlame.diff(t), term);
		if (out.diff[term]) out.diff[term].pixel = await drawn(page, term);
	}
	await page.check('#byfunc');
	for (const term of terms) {
		out.diffMerged[term] = await page.evaluate((t) => window.strataFlame.diff(t), term);
		if (out.diffMerged[term]) out.diffMerged[term].pixel = await drawn(page, term);
	}
	out.diffState = await page.evaluate(() => window.strataFlame.state());
	// Chromium's hint about our own repeated getImageData, not the page's.
	out.console = out.console.filter((m) => !/Multiple readback operations using getImageData/.test(m));
}

main().catch((e) => {
	console.error('flame-browser: ' + (e.stack || e.message));
	process.exit(1);
});
