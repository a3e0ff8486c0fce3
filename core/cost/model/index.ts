/** Cost model of cache placements (paper 001, generalised to Strata's tiers): catalogs, formulas, calculator, recommender. */
export * from './catalogs/schema.js';
export * from './price-catalog.js';
export * from './formulas.js';
export * from './placements.js';
export * from './performance.js';
export * from './calculator.js';
export * from './paper-2010-tables.js';
export * from './recommender.js';
export * from './format.js';
export * from './units.js';
export * from './placement-query.js';
export * from './spot.js';
