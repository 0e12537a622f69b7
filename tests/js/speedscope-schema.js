#!/usr/bin/env node
// speedscope-schema.js FILE — validates FILE against the JSON schema that
// the speedscope npm package publishes (dist/release/file-format-schema.json),
// with ajv. Prints the errors and exits 1 if it does not conform.
'use strict';
const fs = require('fs');
const path = require('path');
const Ajv = require('ajv');

const dir = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist', 'release');
const schema = JSON.parse(fs.readFileSync(path.join(dir, 'file-format-schema.json'), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
const data = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
if (validate(data)) {
	console.log('valid');
	process.exit(0);
}
console.log(JSON.stringify(validate.errors.slice(0, 20), null, 1));
process.exit(1);
