#!/usr/bin/env node
// speedscope-import.js FILE — imports FILE with the speedscope npm package's
// own importer (the code its app runs when you open a file) and prints what
// it imported as JSON:
//
//   {"importer": "<speedscope's log line>", "messages": [[level, text]...],
//    "profiles": [{"name", "unit", "total", "frames": [{name, file, line, self, total}]}]}
//
// speedscope ships only a browser bundle, so the bundle is run in a Node vm
// context with just enough of a browser stubbed for its top level to reach
// the point where the importer module is defined; the bundle's promise for
// that module is captured and the app's rendering is cut off there. The
// importer, its format detection and every console.warn/error it emits are
// speedscope's own. Exit status: 0 imported, 1 import failed, 2 setup error.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

function loadImporter() {
	const dir = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist', 'release');
	const bundle = fs.readdirSync(dir).find((n) => /^speedscope-.*\.js$/.test(n));
	let src = fs.readFileSync(path.join(dir, bundle), 'utf8');
	// The import module's namespace object: var X={};F(X,{importFromFileSystemDirectoryEntry:...
	const ns = src.match(/var ([\w$]+)=\{\};[\w$]+\(\1,\{importFromFileSystemDirectoryEntry:/);
	if (!ns) throw new Error('speedscope bundle: import module not found');
	// The lazy promise of it: var P=Promise.resolve().then(()=>(init(),X));
	const lazy = src.match(new RegExp('var ([\\w$]+)=Promise\\.resolve\\(\\)\\.then\\(\\(\\)=>\\(([\\w$]+)\\(\\),' +
		ns[1].replace(/\$/g, '\\$') + '\\)\\);'));
	if (!lazy) throw new Error('speedscope bundle: importer promise not found');
	src = src.replace(lazy[0], lazy[0] + 'globalThis.__strataImporter=' + lazy[1] +
		';throw new Error("__strata_stop__");');
	const messages = [];
	const log = (level) => (...a) => messages.push([level, a.map(String).join(' ')]);
	const stub = () => new Proxy(function () {}, {
		get: (t, k) => (k === Symbol.toPrimitive ? () => '' : k === 'then' ? undefined : stub()),
		apply: () => stub(),
		construct: () => stub(),
	});
	const ctx = {
		console: { log: log('log'), info: log('info'), debug: log('debug'), warn: log('warn'), error: log('error'),
			assert: (c, ...a) => { if (!c) log('assert')(...a); } },
		TextDecoder, TextEncoder, URL, atob, btoa, setTimeout, clearTimeout, performance,
		location: { hash: '', search: '', href: 'file:///index.html', protocol: 'file:' },
		document: stub(), navigator: { userAgent: 'node' },
		addEventListener() {}, removeEventListener() {},
		matchMedia: () => ({ matches: false, addEventListener() {}, addListener() {} }),
		localStorage: { getItem: () => null, setItem() {} },
	};
	ctx.window = ctx;
	ctx.self = ctx;
	vm.createContext(ctx);
	try {
		vm.runInContext(src, ctx, { filename: bundle });
	} catch (e) {
		if (e.message !== '__strata_stop__') throw e;
	}
	if (!ctx.__strataImporter) throw new Error('speedscope bundle: importer not captured');
	return { importer: ctx.__strataImporter, messages };
}

async function main() {
	const file = process.argv[2];
	if (!file) {
		console.error('usage: speedscope-import.js FILE');
		process.exit(2);
	}
	let setup;
	try {
		setup = loadImporter();
	} catch (e) {
		console.error('speedscope-import: ' + e.message);
		process.exit(2);
	}
	const mod = await setup.importer;
	const messages = setup.messages;
	messages.length = 0;
	const text = fs.readFileSync(file, 'utf8');
	let group;
	try {
		group = await mod.importProfileGroupFromText(path.basename(file), text);
	} catch (e) {
		messages.push(['error', 'import threw: ' + e.message]);
	}
	const out = { importer: null, messages: [], profiles: [] };
	for (const [level, m] of messages) {
		if (level === 'log' && /^Importing as /.test(m)) out.importer = m;
		else out.messages.push([level, m]);
	}
	if (group) {
		for (const p of group.profiles) {
			const frames = [];
			p.forEachFrame((f) => frames.push({ name: f.name, file: f.file, line: f.line,
				self: f.getSelfWeight(), total: f.getTotalWeight() }));
			out.profiles.push({ name: p.getName(), unit: p.getWeightUnit(), total: p.getTotalWeight(), frames });
		}
	}
	process.stdout.write(JSON.stringify(out));
	process.exit(group ? 0 : 1);
}
main();
