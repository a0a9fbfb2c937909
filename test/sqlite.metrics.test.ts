/** client.metrics() on the embedded SQLite store: a fresh file per test. */
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { metricsSuite } from './metrics/suite.js';

metricsSuite(tempSqlite('metrics'));
