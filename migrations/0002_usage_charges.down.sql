DROP TABLE charge_history;
DROP TABLE charges;
DROP TABLE usage;
