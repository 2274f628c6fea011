DROP TABLE tenant_limits;
